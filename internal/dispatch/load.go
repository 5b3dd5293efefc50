package dispatch

import (
	"fmt"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// ErrABI is wrapped by CheckABI's refusal.
var ErrABI = fmt.Errorf("%w: unsupported ABI", runtime.ErrRefused)

// CheckABI refuses a pack built for an ABI this host does not serve: a
// major it does not serve, or a minor newer than the one it does (the pack
// may call what this host lacks). Install and every load check it, so a
// pack installed by a newer packrun is refused by an older one sharing the
// home, not run.
func CheckABI(m *packs.Manifest) error {
	v, served := m.ABI(), abi.Newest()
	if !abi.Serves(v.Major) || v.Minor > served.Minor {
		return fmt.Errorf("%w: %s@%s needs host ABI %s; this host serves %s", ErrABI, m.Name, m.Version, v, abi.ServedList())
	}
	return nil
}

// ModuleLimits is the one place a module's limits are combined: the
// manifest's own (m nil: a bare module, which has none) under override,
// the request's (non-zero fields win; see runtime.Limits.Merge). The
// runtime then fills the fields left zero from its defaults and clamps
// all to its maxima. Packs do not set the host-memory budget: the host's
// applies.
func ModuleLimits(m *packs.Manifest, override runtime.Limits) runtime.Limits {
	if m == nil {
		return runtime.Limits{}.Merge(override)
	}
	l := m.Limits()
	return runtime.Limits{MemoryBytes: l.MemoryBytes, Timeout: l.Timeout, OutputBytes: l.OutputBytes, HostCalls: l.HostCalls}.Merge(override)
}

// BareLoadOptions are the options a bare module (no pack) loads with:
// its name and the request's limits over the runtime's defaults.
func BareLoadOptions(name string, override runtime.Limits) runtime.LoadOptions {
	return runtime.LoadOptions{Name: name, Limits: ModuleLimits(nil, override)}
}

// LoadOptions are the options one module of a pack loads with: the pack's
// limits under override (non-zero fields win; see runtime.Limits.Merge), its
// name, and the exports serving its nodes. Every load of a pack module
// (install's check, an invocation, a task, a replay) builds them here.
func LoadOptions(m *packs.Manifest, mod packs.Module, override runtime.Limits) runtime.LoadOptions {
	return runtime.LoadOptions{
		Name:     m.Name + "@" + m.Version + "/" + mod.Path,
		Limits:   ModuleLimits(m, override),
		PackName: m.Name,
		Exports:  m.Exports(mod.Path),
		ABI:      m.ABI(),
	}
}
