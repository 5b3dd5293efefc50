package packrun

import (
	"strings"
	"testing"

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
