package packindex

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestRefRefusals: a malformed reference is the request's fault (ErrUsage,
// so a 400 and the CLI's usage exit), one line naming it, found before the
// store is read (the index here has none).
func TestRefRefusals(t *testing.T) {
	x := New(nil)
	for ref, says := range map[string]string{
		"@1.0.0":          "no pack name",
		"acme.p@garbage":  `"garbage" is neither a version nor a range`,
		"acme.p@>=1 <<2":  "neither a version nor a range",
		"@":               "no pack name",
		"acme.p@1.0.0.0x": "neither a version nor a range",
	} {
		_, err := x.Match(context.Background(), ref)
		if !errors.Is(err, host.ErrUsage) || !errors.Is(err, host.ErrValidation) || !strings.Contains(err.Error(), says) || !strings.Contains(err.Error(), ref) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Match(%q) = %v; want one ErrUsage line naming %q and saying %q", ref, err, ref, says)
		}
	}
}

func TestParseRef(t *testing.T) {
	for ref, want := range map[string][2]string{"a.b": {"a.b", ""}, "a.b@^1.2": {"a.b", "^1.2"}, "a.b@1@2": {"a.b", "1@2"}} {
		if n, c := ParseRef(ref); n != want[0] || c != want[1] {
			t.Errorf("ParseRef(%q) = %q, %q; want %q, %q", ref, n, c, want[0], want[1])
		}
	}
}
