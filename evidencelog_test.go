package packrun

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// The host's evidence log checkpoints open with the verifier key the
// Host gives, whose origin names the home's host key.
func TestHostLogVerifierKey(t *testing.T) {
	h := openHost(t, t.TempDir())
	if _, err := h.Store().AppendEvent(ctx, host.Event{Type: "custom.note"}); err != nil {
		t.Fatal(err)
	}
	cp, err := h.EvidenceLog().LogSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := h.LogVerifierKey()
	if err != nil || !strings.HasPrefix(vkey, "packrun.local/") {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	c, err := tlog.OpenCheckpoint([]byte(cp.Note), vkey)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size != cp.Size || c.Size == 0 {
		t.Fatalf("checkpoint of size %d, log %d", c.Size, cp.Size)
	}
}

func recordTestAttempt(t *testing.T, h *Host, id string) *host.Attempt {
	t.Helper()
	a := &host.Attempt{AttemptID: id, Outcome: abi.Completed, Node: "n", Output: json.RawMessage(`{"ok":true}`)}
	if err := h.Store().RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

// ProveEntry proves an attempt (by id) and an event (by seq), integrating
// the log first; ProveSince and CheckLog prove the log only grew from an
// older checkpoint; LogConsistency gives both notes and the proof.
func TestHostProveEntry(t *testing.T) {
	h := openHost(t, t.TempDir())
	recordTestAttempt(t, h, "att-one")
	old, err := h.LogCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a := recordTestAttempt(t, h, "att-two")
	ev, err := h.Store().AppendEvent(ctx, host.Event{Type: "custom.note"})
	if err != nil {
		t.Fatal(err)
	}
	vkey, _ := h.LogVerifierKey()
	for _, ref := range []string{a.AttemptID, fmt.Sprint(ev.Seq)} {
		b, err := h.ProveEntry(ctx, ref, 0)
		if err != nil {
			t.Fatalf("prove %s: %v", ref, err)
		}
		if b.VerifierKey != vkey {
			t.Fatalf("bundle names key %q, the log's is %q", b.VerifierKey, vkey)
		}
		if err := h.ProveSince(ctx, b, []byte(old.Note)); err != nil {
			t.Fatal(err)
		}
		cur, prev, err := tlog.CheckSince(b, []byte(old.Note), "")
		if err != nil || prev.Size != old.Size || cur.Size <= old.Size {
			t.Fatalf("check %s: %v (sizes %v %v)", ref, err, prev, cur)
		}
	}
	evs, err := h.Store().Events(ctx, host.EventFilter{AttemptID: a.AttemptID, Type: host.EventAttemptRecorded})
	if err != nil || len(evs) != 1 {
		t.Fatalf("attempt_recorded: %v %v", evs, err)
	}
	if b, _ := h.ProveEntry(ctx, a.AttemptID, 0); !bytes.Equal(b.Entry, mustHex(t, evs[0].Hash)) || b.Index != uint64(evs[0].Seq-1) {
		t.Fatal("the attempt's entry is not its chain hash")
	}
	if _, cur, err := h.CheckLog(ctx, []byte(old.Note)); err != nil || cur.Size < old.Size+2 {
		t.Fatalf("CheckLog: %v", err)
	}
	cb, err := h.LogConsistency(ctx, old.Size, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tlog.CheckConsistency([]byte(cb.Old), []byte(cb.New), cb.Proof, vkey); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]error{"att-none": host.ErrNotFound, "9999": host.ErrNotFound, "0": host.ErrValidation} {
		if _, err := h.ProveEntry(ctx, ref, 0); !errors.Is(err, want) {
			t.Fatalf("prove %s: %v, want %v", ref, err, want)
		}
	}
	other := openHost(t, t.TempDir())
	recordTestAttempt(t, other, "att-x")
	foreign, err := other.LogCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.CheckLog(ctx, []byte(foreign.Note)); !errors.Is(err, ErrLogDiverged) || !strings.Contains(err.Error(), "not this log's") {
		t.Fatalf("another log's checkpoint: %v", err)
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
