package runtime

import (
	"fmt"
	"time"
)

// Limits bound one invocation. Zero fields mean "use the default".
type Limits struct {
	// MemoryBytes caps the module's linear memory.
	MemoryBytes uint64
	// Timeout caps the wall-clock time of one invocation (and of instance
	// initialisation).
	Timeout time.Duration
	// OutputBytes caps the response envelope a node returns.
	OutputBytes uint64
	// HostCalls caps the number of host-function calls per invocation.
	HostCalls int
	// CaptureBytes caps each of stdout, stderr and logs kept per invocation;
	// beyond it output is dropped and the capture marked truncated.
	CaptureBytes int
	// HostMemoryBytes caps what the host holds on the guest's behalf during
	// one invocation, beyond its linear memory: the run state it writes
	// (variables, channels) and the trace of its host calls. Tables,
	// globals and element segments are bounded at load by ModuleLimits.
	HostMemoryBytes uint64
}

// DefaultLimits returns the limits used for any zero field of a module's limits.
func DefaultLimits() Limits {
	return Limits{
		MemoryBytes:  128 << 20,
		Timeout:      30 * time.Second,
		OutputBytes:  16 << 20,
		HostCalls:    1_000_000,
		CaptureBytes: 1 << 20,
		// HostMemoryBytes defaults to the output limit's worth of trace and
		// state for the default node; one invocation of the demo uses < 10 KB.
		HostMemoryBytes: 64 << 20,
	}
}

// MaxLimits returns the host maxima a module's limits are clamped to by default.
func MaxLimits() Limits {
	return Limits{
		MemoryBytes:     4 << 30,
		Timeout:         10 * time.Minute,
		OutputBytes:     256 << 20,
		HostCalls:       100_000_000,
		CaptureBytes:    64 << 20,
		HostMemoryBytes: 1 << 30,
	}
}

const wasmPage = 65536

// orDefault fills zero fields of l from d.
func (l Limits) orDefault(d Limits) Limits { return d.Merge(l) }

// clamp lowers every field of l to at most max.
func (l Limits) clamp(max Limits) Limits {
	l.MemoryBytes = min(l.MemoryBytes, max.MemoryBytes)
	l.Timeout = min(l.Timeout, max.Timeout)
	l.OutputBytes = min(l.OutputBytes, max.OutputBytes)
	l.HostCalls = min(l.HostCalls, max.HostCalls)
	l.CaptureBytes = min(l.CaptureBytes, max.CaptureBytes)
	l.HostMemoryBytes = min(l.HostMemoryBytes, max.HostMemoryBytes)
	return l
}

func (l Limits) validate() error {
	if l.MemoryBytes < wasmPage {
		return fmt.Errorf("memory limit %d bytes is below one 64 KiB page", l.MemoryBytes)
	}
	if l.Timeout < 0 || l.HostCalls < 0 || l.CaptureBytes < 0 {
		return fmt.Errorf("limits must not be negative")
	}
	return nil
}

// Config configures a Runtime. It is immutable: every With method returns a
// modified copy. The zero value is not usable; start from NewConfig.
type Config struct {
	cacheDir string
	defaults Limits
	max      Limits
	modules  ModuleLimits
	poolSize int
	clock    func() time.Time
}

// NewConfig returns the default configuration: no compilation cache on disk,
// DefaultLimits(), MaxLimits(), two prepared instances per module, the system
// clock.
func NewConfig() Config {
	return Config{defaults: DefaultLimits(), max: MaxLimits(), modules: DefaultModuleLimits(), poolSize: 2, clock: time.Now}
}

// WithCacheDir stores compiled modules under dir so later processes skip
// compilation. Several processes may share one directory.
func (c Config) WithCacheDir(dir string) Config { c.cacheDir = dir; return c }

// WithDefaultLimits sets the limits used where a module sets none.
func (c Config) WithDefaultLimits(l Limits) Config {
	c.defaults = l.orDefault(DefaultLimits())
	return c
}

// WithMaxLimits sets the host maxima every module's limits are clamped to.
func (c Config) WithMaxLimits(l Limits) Config { c.max = l.orDefault(MaxLimits()); return c }

// WithModuleLimits sets the shape limits every module must fit to be
// compiled (zero fields keep DefaultModuleLimits()).
func (c Config) WithModuleLimits(l ModuleLimits) Config {
	c.modules = l.orDefault(DefaultModuleLimits())
	return c
}

// WithPoolSize sets how many fresh instances are kept prepared per module
// (0 disables preparation ahead of time).
func (c Config) WithPoolSize(n int) Config { c.poolSize = max(n, 0); return c }

// WithClock replaces the host clock behind openwop_now_ms and WASI clocks.
func (c Config) WithClock(now func() time.Time) Config { c.clock = now; return c }

// HostInfo describes what a Runtime serves.
type HostInfo struct {
	ABIVersions []string        `json:"abiVersions"`
	Namespaces  []NamespaceInfo `json:"namespaces"`
	Limits      LimitsInfo      `json:"defaultLimits"`
	MaxLimits   LimitsInfo      `json:"maxLimits"`
	// ModuleLimits are the shapes a module must fit to be compiled.
	ModuleLimits ModuleLimits `json:"moduleLimits"`
	Engine       string       `json:"engine"`
	CacheDir     string       `json:"cacheDir,omitempty"`
}

// NamespaceInfo lists the functions of one served import namespace.
type NamespaceInfo struct {
	Name      string   `json:"name"`
	Functions []string `json:"functions"`
}

// LimitsInfo is Limits in JSON-friendly units.
type LimitsInfo struct {
	MemoryBytes  uint64 `json:"memoryBytes"`
	TimeoutMs    int64  `json:"timeoutMs"`
	OutputBytes  uint64 `json:"outputBytes"`
	HostCalls    int    `json:"hostCalls"`
	CaptureBytes int    `json:"captureBytes"`
	// HostMemoryBytes is absent from records made before the limit existed.
	HostMemoryBytes uint64 `json:"hostMemoryBytes,omitempty"`
}

func (l Limits) info() LimitsInfo {
	return LimitsInfo{l.MemoryBytes, l.Timeout.Milliseconds(), l.OutputBytes, l.HostCalls, l.CaptureBytes, l.HostMemoryBytes}
}

// Merge returns l with every non-zero field of o in place of l's: the
// limits of a module (a pack's own, or the defaults) under an override
// (command-line flags, an API request). It is the one place limits are
// combined.
func (l Limits) Merge(o Limits) Limits {
	if o.MemoryBytes != 0 {
		l.MemoryBytes = o.MemoryBytes
	}
	if o.Timeout != 0 {
		l.Timeout = o.Timeout
	}
	if o.OutputBytes != 0 {
		l.OutputBytes = o.OutputBytes
	}
	if o.HostCalls != 0 {
		l.HostCalls = o.HostCalls
	}
	if o.CaptureBytes != 0 {
		l.CaptureBytes = o.CaptureBytes
	}
	if o.HostMemoryBytes != 0 {
		l.HostMemoryBytes = o.HostMemoryBytes
	}
	return l
}

// LimitError reports a limit asked for above the host maximum (a Runtime
// would otherwise lower it without a word).
type LimitError struct {
	Limit      string // "memory", "timeout", "output", "host calls", "capture", "host memory"
	Asked, Max string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s limit %s is above the host maximum %s", e.Limit, e.Asked, e.Max)
}

// CheckMax returns a *LimitError for the first non-zero field of l above
// max, or nil.
func (l Limits) CheckMax(max Limits) error {
	size := func(name string, v, m uint64) error {
		if v > m {
			return &LimitError{Limit: name, Asked: formatBytes(v), Max: formatBytes(m)}
		}
		return nil
	}
	count := func(name string, v, m int) error {
		if v > m {
			return &LimitError{Limit: name, Asked: fmt.Sprint(v), Max: fmt.Sprint(m)}
		}
		return nil
	}
	if l.Timeout > max.Timeout {
		return &LimitError{Limit: "timeout", Asked: l.Timeout.String(), Max: max.Timeout.String()}
	}
	for _, err := range []error{
		size("memory", l.MemoryBytes, max.MemoryBytes),
		size("output", l.OutputBytes, max.OutputBytes),
		count("host calls", l.HostCalls, max.HostCalls),
		count("capture", l.CaptureBytes, max.CaptureBytes),
		size("host memory", l.HostMemoryBytes, max.HostMemoryBytes),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// formatBytes renders n in the largest binary unit that divides it.
func formatBytes(n uint64) string {
	for _, u := range []struct {
		size uint64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// Limits converts recorded limits (an attempt's, a trace's) back.
func (i LimitsInfo) Limits() Limits {
	return Limits{MemoryBytes: i.MemoryBytes, Timeout: time.Duration(i.TimeoutMs) * time.Millisecond, OutputBytes: i.OutputBytes,
		HostCalls: i.HostCalls, CaptureBytes: i.CaptureBytes, HostMemoryBytes: i.HostMemoryBytes}
}
