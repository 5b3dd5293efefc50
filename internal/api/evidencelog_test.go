package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// The checkpoint is served as its signed note (text/plain) or as JSON;
// an attempt's and an event's inclusion proofs and a consistency proof
// verify offline with the verifier key the JSON checkpoint gives.
func TestEvidenceLogRoutes(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	ctx := context.Background()
	att := &host.Attempt{AttemptID: "att-logapi", Node: helloNode, Outcome: abi.Completed, Output: json.RawMessage(`{"ok":true}`)}
	if err := e.backend.RecordAttempt(ctx, att); err != nil {
		t.Fatal(err)
	}
	if _, err := e.backend.LogSync(ctx); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/evidence/checkpoint", nil)
	req.Header.Set("Accept", "application/json")
	res, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var cp logCheckpoint
	if err := json.NewDecoder(res.Body).Decode(&cp); err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	old, err := tlog.OpenCheckpoint([]byte(cp.Note), cp.VerifierKey)
	if err != nil || old.Size != cp.Size || cp.Size == 0 {
		t.Fatalf("JSON checkpoint %+v: %v", cp, err)
	}
	ev, err := e.backend.AppendEvent(ctx, host.Event{Type: "custom.note"})
	if err != nil {
		t.Fatal(err)
	}

	// The note as text, as it is: the newest, after the event is integrated.
	if _, err := e.backend.LogSync(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = e.client.Get(e.url + "/v1/evidence/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	note, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != 200 || ct != "text/plain; charset=utf-8" {
		t.Fatalf("checkpoint: %d %q", res.StatusCode, ct)
	}
	cur, err := tlog.OpenCheckpoint(note, cp.VerifierKey)
	if err != nil || cur.Size <= old.Size {
		t.Fatalf("text checkpoint of size %v: %v", cur, err)
	}

	for _, ref := range []string{att.AttemptID, fmt.Sprint(ev.Seq)} {
		b := decode[tlog.Bundle](t, e.get("/v1/evidence/proof/inclusion?entry="+ref))
		got, err := tlog.CheckEntry(&b, cp.VerifierKey)
		if err != nil || b.VerifierKey != cp.VerifierKey {
			t.Fatalf("inclusion of %s: %v (key %q)", ref, err, b.VerifierKey)
		}
		if ref == att.AttemptID && b.Index != uint64(att.EventSeq-1) || got.Size < cur.Size {
			t.Fatalf("inclusion of %s: index %d in size %d", ref, b.Index, got.Size)
		}
	}
	r := e.get(fmt.Sprintf("/v1/evidence/proof/inclusion?entry=%s&size=%d", att.AttemptID, old.Size))
	wantStatus(t, r, http.StatusOK)
	at := decode[tlog.Bundle](t, r)
	if got, err := tlog.CheckEntry(&at, cp.VerifierKey); err != nil || got.Size != old.Size {
		t.Fatalf("inclusion at size %d: %v", old.Size, err)
	}
	c := decode[tlog.ConsistencyBundle](t, e.get(fmt.Sprintf("/v1/evidence/proof/consistency?from=%d&to=%d", old.Size, cur.Size)))
	if _, _, err := tlog.CheckConsistency([]byte(c.Old), []byte(c.New), c.Proof, cp.VerifierKey); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		path, field string
		status      int
	}{
		{"/v1/evidence/proof/inclusion?entry=att-none", "entry", 404},
		{fmt.Sprintf("/v1/evidence/proof/inclusion?entry=%d", ev.Seq+1000), "entry", 404},
		{"/v1/evidence/proof/inclusion?entry=0", "entry", 400},
		{"/v1/evidence/proof/inclusion", "entry", 400},
		{"/v1/evidence/proof/inclusion?entry=1&size=x", "size", 400},
		{"/v1/evidence/proof/inclusion?entry=1&size=0", "size", 400},
		{fmt.Sprintf("/v1/evidence/proof/inclusion?entry=1&size=%d", cur.Size+1000), "", 404},
		{"/v1/evidence/proof/consistency?from=2&to=1", "from", 400},
		{"/v1/evidence/proof/consistency", "from", 400},
		{"/v1/evidence/proof/consistency?from=1&to=-1", "to", 400},
	} {
		r := e.get(tc.path)
		code := CodeNotFound
		if tc.status == 400 {
			code = CodeInvalid
		}
		wantError(t, r, tc.status, code, tc.field)
	}
}
