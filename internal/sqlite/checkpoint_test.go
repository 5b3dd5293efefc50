package sqlite

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// reopen closes the fixture's store (which writes the last head
// checkpoint) and opens the database again, as the next process would.
func reopen(t *testing.T, f *fixture) *fixture {
	t.Helper()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, f.path, Options{Now: f.opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{Store: s, path: f.path, clock: f.clock}
}

// Deleting the newest attempt together with its events leaves a chain
// that is whole; the signed head checkpoint shows it was cut.
func TestCheckpointFindsACutChain(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	f = reopen(t, f)
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != rep.HeadSeq || rep.Checkpoint.Hash != rep.Head {
		t.Fatalf("intact store: %+v %+v (%v)", rep, rep.Broken, err)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(f.path), "host.key")); err != nil || len(strings.TrimSpace(string(b))) != 64 {
		t.Fatalf("host key: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(f.path), "host.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("host key mode: %v %v", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(f.path), "*.new-*")); len(left) > 0 {
		t.Fatalf("temporary key files left: %v", left)
	}

	// The attacker removes the attempt and every event from its recording on.
	tamper(t, f, `DELETE FROM attempt_records WHERE attempt_id = '`+a.AttemptID+`'`,
		`DELETE FROM artifacts`, `DELETE FROM runtime_events WHERE seq >= `+itoa(a.EventSeq))
	rep, err = f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != host.BreakHeadRewound || !strings.Contains(rep.Broken.Detail, "were removed") {
		t.Fatalf("cut chain reported as %+v %+v", rep, rep.Broken)
	}
	t.Log(rep.Broken.Detail)
}

// A checkpoint edited to match a cut chain is not signed by the host key.
func TestCheckpointForged(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	f = reopen(t, f)
	path := filepath.Join(filepath.Dir(f.path), "evidence-head.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cp evidence.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	cp.Seq--
	evs, _ := f.Events(ctx, host.EventFilter{AfterSeq: cp.Seq - 1, Limit: 1})
	cp.Hash = evs[0].Hash
	b, _ = json.Marshal(cp)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != host.BreakCheckpoint || !strings.Contains(rep.Broken.Detail, "not signed by this host's key") {
		t.Fatalf("forged checkpoint reported as %+v %+v", rep, rep.Broken)
	}
}

// A store written before checkpoints existed is anchored when opened; a
// running store anchors each commit's head without waiting for Close.
func TestCheckpointSeededAndKeptCurrent(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	f = reopen(t, f)
	path := filepath.Join(filepath.Dir(f.path), "evidence-head.json")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	f = reopen(t, f)
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != rep.HeadSeq {
		t.Fatalf("old store not anchored on open: %+v %+v (%v)", rep, rep.Broken, err)
	}
	// A checkpoint a crash cut short counts as none, not as forged, and is
	// replaced at the next open.
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(`{"format":"packrun.evid`), 0o644); err != nil {
		t.Fatal(err)
	}
	f = reopen(t, f)
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != rep.HeadSeq {
		t.Fatalf("cut-short checkpoint: %+v %+v (%v)", rep, rep.Broken, err)
	}
	e, err := f.AppendEvent(ctx, host.Event{Type: "custom.note", Data: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		cp, err := evidence.ReadCheckpoint(path)
		return err == nil && cp.Seq == e.Seq && cp.Hash == e.Hash
	})
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met within 5s")
}
