package packrun_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/registry"
)

// TestOneErrNotFound: the module has one not-found sentinel,
// host.ErrNotFound; packrun.ErrNotFound and registry.ErrNotFound are the
// same value, so a not-found error of any of the three packages matches
// every name, and still matches what it matched before.
func TestOneErrNotFound(t *testing.T) {
	if packrun.ErrNotFound != host.ErrNotFound || registry.ErrNotFound != host.ErrNotFound {
		t.Fatal("packrun.ErrNotFound and registry.ErrNotFound must be host.ErrNotFound")
	}
	_, missingFile := packrun.ReadFile(filepath.Join(t.TempDir(), "missing.json"), 1<<10)
	removeUnknown := registry.NewPolicy().Remove("nobody")
	hostErr := host.Errorf("memory get", "n/k", host.ErrNotFound, "")
	for _, tc := range []struct {
		name   string
		err    error
		alsoIs error // what it matched before the three became one
	}{
		{"packrun.ReadFile of a missing file", missingFile, fs.ErrNotExist},
		{"registry.Policy.Remove of an unknown entry", removeUnknown, nil},
		{"a host service's not found", hostErr, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("no error")
			}
			for _, target := range []error{packrun.ErrNotFound, host.ErrNotFound, registry.ErrNotFound} {
				if !errors.Is(tc.err, target) {
					t.Errorf("%v does not match %v", tc.err, target)
				}
			}
			if tc.alsoIs != nil && !errors.Is(tc.err, tc.alsoIs) {
				t.Errorf("%v no longer matches %v", tc.err, tc.alsoIs)
			}
			for _, other := range []error{packrun.ErrUsage, host.ErrValidation, host.ErrConflict, registry.ErrUntrusted} {
				if errors.Is(tc.err, other) {
					t.Errorf("%v matches %v too", tc.err, other)
				}
			}
		})
	}
	if got := host.ABIStatus(missingFile); got != host.ABIStatus(hostErr) {
		t.Errorf("ABIStatus of a missing file %v, of a host not-found %v", got, host.ABIStatus(hostErr))
	}
}
