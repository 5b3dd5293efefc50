package packrun

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// The library refuses a home whose anchor is lost as the CLI does
// (host.ErrUnanchored, naming the file), Reanchor needs a reason and
// re-anchors it, and the home opens again.
func TestOpenRefusesALostAnchor(t *testing.T) {
	f := newFixture(t)
	f.install(t, hello("1.0.0"))
	if _, err := f.Invoke(ctx, "local.hello.c", InvokeRequest{Input: []byte(`{"name":"a"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, damage := range []struct{ file, says string }{{"evidence-head.json", "is missing"}, {"host.key", "is missing"}} {
		if err := os.Remove(filepath.Join(f.home, damage.file)); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, f.home, Config{})
		if !errors.Is(err, host.ErrUnanchored) || !strings.Contains(err.Error(), filepath.Join(f.home, damage.file)) || !strings.Contains(err.Error(), damage.says) {
			t.Fatalf("open without %s: %v", damage.file, err)
		}
		if _, err := Reanchor(ctx, f.home, Config{}, "  "); !errors.Is(err, ErrUsage) {
			t.Fatalf("reanchor without a reason: %v", err)
		}
		r, err := Reanchor(ctx, f.home, Config{}, "lost "+damage.file+" in a test")
		if err != nil {
			t.Fatal(err)
		}
		if r.Event.Type != host.EventEvidenceReanchored || !strings.Contains(r.Before.Problem, damage.says) || len(r.HostKey) != 64 {
			t.Fatalf("reanchor: %+v, before %+v", r.Event, r.Before)
		}
		h, err := Open(ctx, f.home, Config{})
		if err != nil {
			t.Fatalf("open after reanchor: %v", err)
		}
		rep, err := h.VerifyChain(ctx, nil)
		if err != nil || !rep.OK || rep.Checkpoint == nil || rep.Checkpoint.Seq != r.Event.Seq {
			t.Fatalf("verify after reanchor: %+v %v", rep, err)
		}
		h.Close(ctx)
	}
}
