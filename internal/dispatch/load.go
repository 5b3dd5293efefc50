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

// PackLimits are a manifest's own limits (zero fields: the runtime's
// defaults). Packs do not set the host-memory budget: the host's applies.
func PackLimits(m *packs.Manifest) runtime.Limits {
	l := m.Limits()
	return runtime.Limits{MemoryBytes: l.MemoryBytes, Timeout: l.Timeout, OutputBytes: l.OutputBytes, HostCalls: l.HostCalls}
}

// LoadOptions are the options one module of a pack loads with: the pack's
// limits under override (non-zero fields win; see runtime.Limits.Merge), its
// name, and the exports serving its nodes. Every load of a pack module
// (install's check, an invocation, a task, a replay) builds them here.
func LoadOptions(m *packs.Manifest, mod packs.Module, override runtime.Limits) runtime.LoadOptions {
	return runtime.LoadOptions{
		Name:     m.Name + "@" + m.Version + "/" + mod.Path,
		Limits:   PackLimits(m).Merge(override),
		PackName: m.Name,
		Exports:  m.Exports(mod.Path),
		ABI:      m.ABI(),
	}
}
