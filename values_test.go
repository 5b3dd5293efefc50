package packrun

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// An attempt with a 10 KB input (and so a 10 KB greeting), whose values
// the store keeps out of line, replays identically, alone and with
// --all, and its exported trace carries the whole input.
func TestLargeValuesReplay(t *testing.T) {
	f := newFixture(t)
	f.install(t, hello("1.0.0"))
	in := json.RawMessage(`{"name":"` + strings.Repeat("x", 10_000) + `"}`)
	var ids []string
	for range 3 { // the same input each time: stored once
		inv, err := f.InvokePack(ctx, "local.hello.c", InvokeRequest{Input: in})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inv.Attempt.AttemptID)
	}
	v, err := f.Replay(ctx, ids[1], ReplayOptions{})
	if err != nil || !v.Identical {
		t.Fatalf("replay: %+v %v", v, err)
	}
	sum, err := f.ReplayAll(ctx, ReplayFilter{}, ReplayOptions{}, nil)
	if err != nil || sum.Total != 3 || sum.Identical != 3 {
		t.Fatalf("replay --all: %+v %v", sum, err)
	}
	raw, err := f.ExportTrace(ctx, ids[2])
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTrace(raw)
	if err != nil || !bytes.Contains(raw, []byte(strings.Repeat("x", 10_000))) {
		t.Fatalf("trace: %v (%d bytes)", err, len(raw))
	}
	if v, err := f.ReplayTrace(ctx, tr, ReplayOptions{}); err != nil || !v.Identical {
		t.Fatalf("replay of the exported trace: %+v %v", v, err)
	}
	if rep, err := f.VerifyChain(ctx, nil); err != nil || !rep.OK {
		t.Fatalf("chain: %+v %v", rep, err)
	}
}
