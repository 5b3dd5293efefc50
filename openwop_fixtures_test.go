package packrun

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// waitRun polls a run until it is terminal.
func waitRun(t *testing.T, h *Host, runID string) *host.Run {
	t.Helper()
	for range 2000 {
		r, err := h.GetRun(ctx, "", runID)
		if err != nil {
			t.Fatal(err)
		}
		if host.RunTerminal(r.Status) {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s did not end", runID)
	return nil
}

func runEventTypes(t *testing.T, h *Host, runID string) []string {
	t.Helper()
	evs, err := h.RunEvents(ctx, "", runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// TestOpenwopCoreFixtures: openwop's core conformance fixtures are
// built of core.* nodes packrun runs itself, so they are advertised and
// run with no pack installed: noop completes, delay waits its delayMs
// (a variable with a default), cancellable stops when cancelled, failure
// fails with a structured error, idempotent requires its nonce; a fork
// replays core nodes from their recorded outputs.
func TestOpenwopCoreFixtures(t *testing.T) {
	h := openHost(t, t.TempDir())
	fs, err := h.OpenwopFixtures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"conformance-noop", "conformance-delay", "conformance-cancellable", "conformance-idempotent", "conformance-failure"} {
		if !slices.Contains(fs, f) {
			t.Errorf("fixture %s not advertised: %v", f, fs)
		}
	}
	if slices.Contains(fs, "conformance-wasm-pack-roundtrip") {
		t.Errorf("a fixture advertised without its pack: %v", fs)
	}

	start := func(id, inputs string) *host.Run {
		t.Helper()
		r, err := h.StartRun(ctx, "", id, json.RawMessage(inputs))
		if err != nil {
			t.Fatalf("start %s %s: %v", id, inputs, err)
		}
		return r
	}
	noop := waitRun(t, h, start("conformance-noop", "").RunID)
	if want := []string{"run.started", "node.started", "node.completed", "run.completed"}; noop.Status != host.RunCompleted || !slices.Equal(runEventTypes(t, h, noop.RunID), want) {
		t.Fatalf("noop: %s %v", noop.Status, runEventTypes(t, h, noop.RunID))
	}

	delay := start("conformance-delay", `{"delayMs":30}`)
	if got := waitRun(t, h, delay.RunID); got.Status != host.RunCompleted {
		t.Fatalf("delay: %+v", got)
	}
	evs, _ := h.RunEvents(ctx, "", delay.RunID)
	if done := evs[len(evs)-1]; string(done.Payload) != `{"outputs":{"wait":{"delayMs":30}}}` {
		t.Fatalf("delay's run.completed: %s", done.Payload)
	}

	// The default delayMs of cancellable (30 s) is applied to the
	// run's inputs; cancelling stops it mid-node.
	c := start("conformance-cancellable", `{}`)
	if string(c.Inputs) != `{"delayMs":30000}` {
		t.Fatalf("cancellable's inputs %s, want the default applied", c.Inputs)
	}
	if _, err := h.CancelRun(ctx, "", c.RunID, "test"); err != nil {
		t.Fatal(err)
	}
	if got := waitRun(t, h, c.RunID); got.Status != host.RunCancelled {
		t.Fatalf("cancellable: %+v", got)
	}

	fail := waitRun(t, h, start("conformance-failure", "").RunID)
	if fail.Status != host.RunFailed || fail.Error == nil || fail.Error.Code == "" || fail.Error.Message == "" {
		t.Fatalf("failure: %+v", fail)
	}
	if types := runEventTypes(t, h, fail.RunID); !slices.Contains(types, "node.failed") || types[len(types)-1] != "run.failed" {
		t.Fatalf("failure's events %v", types)
	}

	if got := waitRun(t, h, start("conformance-idempotent", `{"nonce":"n1"}`).RunID); got.Status != host.RunCompleted {
		t.Fatalf("idempotent: %+v", got)
	}
	for _, c := range []struct{ id, inputs, field string }{
		{"conformance-idempotent", `{}`, "inputs.nonce"},
		{"conformance-idempotent", `{"nonce":1}`, "inputs.nonce"},
		{"conformance-delay", `{"delayMs":"soon"}`, "inputs.delayMs"},
	} {
		_, err := h.StartRun(ctx, "", c.id, json.RawMessage(c.inputs))
		var he *host.Error
		if !errors.Is(err, host.ErrValidation) || !errors.As(err, &he) || he.Field != c.field {
			t.Errorf("%s %s: %v, want invalid %s", c.id, c.inputs, err, c.field)
		}
	}
	// A delayMs out of bounds fails the node, not the request.
	if got := waitRun(t, h, start("conformance-delay", `{"delayMs":9999999}`).RunID); got.Status != host.RunFailed {
		t.Fatalf("delay out of bounds: %+v", got)
	}

	fork, err := h.ForkRun(ctx, "", noop.RunID, "replay", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := waitRun(t, h, fork.RunID); got.Status != host.RunCompleted {
		t.Fatalf("fork of noop: %+v", got)
	}
}
