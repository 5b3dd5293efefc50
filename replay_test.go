package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

// ReplayAll replays on several workers while it reads the next page; the
// outcomes are counted once each, progress runs in order, and a cancelled
// context stops it with the context's error.
func TestReplayAllPipeline(t *testing.T) {
	f := newFixture(t)
	f.install(t, hello("1.0.0"))
	const n = replayPage + 44 // more than one page
	for i := range n {
		if _, err := f.InvokePack(ctx, "local.hello.c", InvokeRequest{Input: json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	last := 0
	sum, err := f.ReplayAll(ctx, ReplayFilter{}, ReplayOptions{}, func(done, total int) {
		if done != last+1 || total != n {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	})
	if err != nil || sum.Total != n || sum.Identical != n || last != n {
		t.Fatalf("replay --all: %+v, %v (progress reached %d)", sum, err, last)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := 0
	_, err = f.ReplayAll(cctx, ReplayFilter{}, ReplayOptions{}, func(done, total int) {
		if seen = done; done == 10 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) || seen < 10 || seen >= n {
		t.Fatalf("cancelled after 10: %v, %d replayed", err, seen)
	}
}
