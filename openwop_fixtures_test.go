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

// TestOpenwopRecursionLimit: conformance-cap-breach (six core.noop
// nodes) run with recursionLimit 3 starts three nodes, then records one
// cap.breached {kind node-executions, limit 3, observed 4, nodeId n4}
// before run.failed recursion_limit_exceeded; without a limit it
// completes. The limit is part of what an Idempotency-Key compares.
func TestOpenwopRecursionLimit(t *testing.T) {
	h := openHost(t, t.TempDir())
	if fs, _ := h.OpenwopFixtures(ctx); !slices.Contains(fs, "conformance-cap-breach") {
		t.Fatalf("conformance-cap-breach not advertised: %v", fs)
	}
	r, _, err := h.StartRunWith(ctx, "", "conformance-cap-breach", nil, "k1", host.RunOptions{RecursionLimit: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := waitRun(t, h, r.RunID)
	if got.Status != host.RunFailed || got.Error == nil || got.Error.Code != "recursion_limit_exceeded" || got.RecursionLimit != 3 {
		t.Fatalf("run %+v", got)
	}
	evs, _ := h.RunEvents(ctx, "", r.RunID)
	started, breached := 0, 0
	for i, e := range evs {
		switch e.Type {
		case host.RunEventNodeStarted:
			started++
		case host.RunEventCapBreached:
			breached++
			var p struct {
				Kind            string
				Limit, Observed int
				NodeID          string
			}
			if json.Unmarshal(e.Payload, &p) != nil || p.Kind != "node-executions" || p.Limit != 3 || p.Observed != 4 || p.NodeID != "n4" {
				t.Errorf("cap.breached %s", e.Payload)
			}
			if evs[len(evs)-1].Type != host.RunEventFailed || i >= len(evs)-1 {
				t.Errorf("cap.breached at %d of %d, the last %s", i, len(evs), evs[len(evs)-1].Type)
			}
		}
	}
	if started != 3 || breached != 1 {
		t.Fatalf("%d node.started, %d cap.breached: %v", started, breached, runEventTypes(t, h, r.RunID))
	}
	if again, created, err := h.StartRunWith(ctx, "", "conformance-cap-breach", nil, "k1", host.RunOptions{RecursionLimit: 3}); err != nil || created || again.RunID != r.RunID {
		t.Fatalf("the same key and limit: %v %v %v", again, created, err)
	}
	if _, _, err := h.StartRunWith(ctx, "", "conformance-cap-breach", nil, "k1", host.RunOptions{RecursionLimit: 4}); !errors.Is(err, host.ErrIdempotencyMismatch) {
		t.Fatalf("the same key, another limit: %v", err)
	}
	if _, _, err := h.StartRunWith(ctx, "", "conformance-cap-breach", nil, "", host.RunOptions{RecursionLimit: -1}); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("limit -1: %v", err)
	}
	if got := waitRun(t, h, start(t, h, "conformance-cap-breach").RunID); got.Status != host.RunCompleted {
		t.Fatalf("without a limit: %+v", got)
	}
}

func start(t *testing.T, h *Host, id string) *host.Run {
	t.Helper()
	r, err := h.StartRun(ctx, "", id, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
