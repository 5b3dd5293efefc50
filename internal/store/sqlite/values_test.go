package sqlite

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// A record written before values went out of line (version 2, a large
// input inline) still verifies, reads and streams whole beside the new
// ones; nothing of it is rewritten.
func TestInlineRecordsOfBeforeStillVerify(t *testing.T) {
	f := newFixture(t, Options{})
	big := json.RawMessage(`{"name":"` + strings.Repeat("x", 3*evidence.ValueMin) + `"}`)
	old := &host.Attempt{AttemptID: "att-old", Outcome: abi.Completed, Input: big, Output: big}
	if err := storecore.NormalizeAttempt(old, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	rec := evidence.AppendRecordV2(nil, old)
	old.ContentHash = evidence.HashRecord(rec)
	if err := f.w.do(ctx, func(tx *wtx) error { return f.recordAttempt(tx, &attemptRow{a: old, record: rec}) }); err != nil {
		t.Fatal(err)
	}
	fresh := &host.Attempt{AttemptID: "att-new", Outcome: abi.Completed, Input: big, Output: big}
	if err := f.RecordAttempt(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := f.db.QueryRow(`SELECT record FROM attempt_records WHERE attempt_id = 'att-old'`).Scan(&stored); err != nil || !bytes.Equal(stored, rec) {
		t.Fatalf("the old record was rewritten (%v)", err)
	}
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK || rep.Attempts != 2 {
		t.Fatalf("chain: %+v %v", rep, err)
	}
	for _, id := range []string{"att-old", "att-new"} {
		a, err := f.Attempt(ctx, id)
		if err != nil || !bytes.Equal(a.Input, big) || !bytes.Equal(a.Output, big) || !evidence.CheckAttempt(a) {
			t.Fatalf("%s: %v", id, err)
		}
	}
	// Its bundle verifies offline under the hash it was recorded with.
	if b, err := f.ExportAttempt(ctx, "att-old"); err != nil || evidence.VerifyBundle(b) != nil {
		t.Fatalf("bundle of the old record: %v", err)
	}
	err := f.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(a *host.Attempt, verr error) error {
		if verr != nil || !bytes.Equal(a.Input, big) {
			t.Fatalf("%s: %v", a.AttemptID, verr)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
