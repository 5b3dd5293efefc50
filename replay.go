package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// Trace is a portable record of one attempt (packrun-trace/v1): the module
// digest, the input, every host call with its result, the expected result.
type Trace = replay.Trace

// ReplayVerdict is the result of one replay: identical, or the first
// divergence.
type ReplayVerdict = replay.Verdict

// MaxTraceBytes bounds a trace file read with ParseTrace.
const MaxTraceBytes = replay.MaxTraceBytes

// ParseTrace decodes a trace file from untrusted bytes, checking its digest.
func ParseTrace(b []byte) (*Trace, error) { return replay.Parse(b) }

// ReplayOptions adjust a replay.
type ReplayOptions struct {
	// Against runs the attempt on another version instead of the recorded
	// module: an installed NAME@VERSION (or NAME@RANGE, or NAME) or a pack
	// FILE.pack (verified with Trust).
	Against string
	Trust   PackFiles
}

// replayer loads the modules replays need, once each.
type replayer struct {
	h    *Host
	rt   *runtime.Runtime
	opts ReplayOptions

	mu        sync.Mutex
	against   *packs.Archive // opts.Against, opened once
	mods      map[string]*runtime.Module
	contracts map[string]*dispatch.Contract // the node's schemas, by the same key as mods
}

func (h *Host) replayer(ctx context.Context, opts ReplayOptions) (*replayer, error) {
	rt, err := h.Runtime(ctx)
	if err != nil {
		return nil, err
	}
	r := &replayer{h: h, rt: rt, opts: opts, mods: map[string]*runtime.Module{}, contracts: map[string]*dispatch.Contract{}}
	if opts.Against != "" {
		if strings.HasSuffix(opts.Against, ".pack") || strings.HasSuffix(opts.Against, ".tgz") {
			_, r.against, err = h.VerifyFile(ctx, opts.Against, opts.Trust)
		} else {
			r.against, err = h.index.Open(ctx, opts.Against)
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *replayer) close(ctx context.Context) {
	for _, m := range r.mods {
		m.Close(ctx)
	}
}

// recordedLimits are the limits an attempt ran under, as recorded.
func recordedLimits(raw json.RawMessage) runtime.Limits {
	var li runtime.LimitsInfo
	if json.Unmarshal(raw, &li) != nil {
		return runtime.Limits{}
	}
	return li.Limits()
}

// module loads the module a trace replays on, and the node's contract (its
// schemas, nil for a bare module), once per (module, node).
func (r *replayer) module(ctx context.Context, t *Trace) (*runtime.Module, *dispatch.Contract, error) {
	key := t.ModuleSHA256 + "|" + t.Node
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.mods[key]; ok {
		return m, r.contracts[key], nil
	}
	limits := recordedLimits(t.Limits)
	var wasm []byte
	var opts runtime.LoadOptions
	var contract *dispatch.Contract
	var contractErr error
	pack := func(arch *packs.Archive, mod packs.Module) {
		wasm, _ = arch.File(mod.Path)
		opts = dispatch.LoadOptions(arch.Manifest, mod, limits)
		contract, contractErr = dispatch.ContractOf(arch.SHA256, arch.Manifest, t.Node)
	}
	switch {
	case r.against != nil:
		m := r.against.Manifest
		mod, ok := m.NodeModule(t.Node)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %s@%s has no node %q", runtime.ErrUnknownNode, m.Name, m.Version, t.Node)
		}
		if err := dispatch.CheckABI(m); err != nil {
			return nil, nil, err
		}
		pack(r.against, mod)
	case t.Pack != "":
		arch, err := r.h.index.Open(ctx, t.Pack)
		if err != nil {
			return nil, nil, fmt.Errorf("recorded pack %s: %w", t.Pack, err)
		}
		for _, mod := range arch.Manifest.Runtime.Modules {
			if mod.SHA256 == t.ModuleSHA256 {
				pack(arch, mod)
			}
		}
		if wasm == nil {
			return nil, nil, fmt.Errorf("installed %s has no module with sha256 %s", t.Pack, t.ModuleSHA256)
		}
	default:
		b, err := r.h.modules().Get(t.ModuleSHA256)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, notFound("module %s is not kept in this home (replay against NAME@VERSION or FILE.pack)", t.ModuleSHA256)
		} else if err != nil {
			return nil, nil, err
		}
		wasm = b
		opts = runtime.LoadOptions{Name: t.ModuleSHA256[:12], Limits: limits}
	}
	if contractErr != nil {
		return nil, nil, contractErr
	}
	m, err := r.rt.Load(ctx, wasm, opts)
	if err != nil {
		return nil, nil, err
	}
	r.mods[key], r.contracts[key] = m, contract
	return m, contract, nil
}

func (r *replayer) run(ctx context.Context, t *Trace) (*ReplayVerdict, error) {
	m, c, err := r.module(ctx, t)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return replay.Run(ctx, m, t, nil)
	}
	return replay.Run(ctx, m, t, c)
}

// Replay re-executes one recorded attempt from its trace, with no side
// effects (every host call is served from the trace; nothing is recorded),
// and reports whether it behaved identically.
//
// The attempt is checked against the event that recorded it first: one
// that was changed is refused with an error matching ErrTampered.
func (h *Host) Replay(ctx context.Context, attemptID string, opts ReplayOptions) (*ReplayVerdict, error) {
	if err := h.store.VerifyAttempt(ctx, attemptID); err != nil {
		return nil, err
	}
	t, err := h.Trace(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	return h.ReplayTrace(ctx, t, opts)
}

// ReplayTrace re-executes a trace (ParseTrace, or Trace).
func (h *Host) ReplayTrace(ctx context.Context, t *Trace, opts ReplayOptions) (*ReplayVerdict, error) {
	r, err := h.replayer(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close(ctx)
	return r.run(ctx, t)
}

// Trace returns the portable trace of a recorded attempt.
func (h *Host) Trace(ctx context.Context, attemptID string) (*Trace, error) {
	att, err := h.store.Attempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	return replay.FromAttempt(att)
}

// ReplayFilter selects the recorded attempts ReplayAll replays.
type ReplayFilter struct {
	// Pack selects attempts of this pack: NAME or NAME@VERSION.
	Pack string
	// TaskType selects attempts of tasks of this type.
	TaskType string
	// Since selects attempts started at or after this time.
	Since time.Time
}

// ReplaySummary is what ReplayAll found.
type ReplaySummary struct {
	Total       int `json:"total"`
	Identical   int `json:"identical"`
	Diverged    int `json:"diverged"`
	CouldNotRun int `json:"could_not_run"`
	// Tampered counts the attempts of CouldNotRun that no longer match
	// the event that recorded them (ErrTampered): they were not replayed.
	Tampered    int              `json:"tampered"`
	Divergences []*ReplayVerdict `json:"divergences,omitempty"` // the first MaxListed
	Errors      []string         `json:"errors,omitempty"`      // the first MaxListed: "ATTEMPT_ID: why"
	DurationMs  float64          `json:"duration_ms"`
}

// MaxListed is how many divergences and errors a ReplaySummary lists.
const MaxListed = 5

// replayPage bounds how many attempts ReplayAll holds between reading
// and folding them: memory does not grow with the store.
const replayPage = 256

// ReplayAll replays every recorded attempt filter selects (with
// opts.Against: only the attempts of that pack's name, on that version).
// Each attempt is checked against the event that recorded it first; one
// that was changed is not replayed and counts as could-not-run, with the
// reason. progress, if not nil, is called after each attempt; total is
// the number of attempts selected when the replay began.
func (h *Host) ReplayAll(ctx context.Context, filter ReplayFilter, opts ReplayOptions, progress func(done, total int)) (*ReplaySummary, error) {
	r, err := h.replayer(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close(ctx)
	af := host.AttemptFilter{Pack: filter.Pack, TaskType: filter.TaskType, Since: filter.Since}
	start := time.Now()
	sum := &ReplaySummary{}
	if r.against != nil {
		name := r.against.Manifest.Name
		if af.Pack == "" {
			af.Pack = name
		} else if n, _ := ParseRef(af.Pack); n != name {
			return sum, nil // another pack's attempts: none can run on this one
		}
	}
	total := 0
	if progress != nil {
		if total, err = h.store.CountAttempts(ctx, af); err != nil {
			return nil, err
		}
	}
	fail := func(id string, err error) {
		sum.CouldNotRun++
		if errors.Is(err, host.ErrTampered) {
			sum.Tampered++
		}
		if len(sum.Errors) < MaxListed {
			sum.Errors = append(sum.Errors, id+": "+strings.Join(strings.Fields(err.Error()), " "))
		}
	}
	fold := func(o replayed) {
		sum.Total++
		switch {
		case o.err != nil:
			fail(o.id, o.err)
		case o.v.Identical:
			sum.Identical++
		default:
			sum.Diverged++
			if len(sum.Divergences) < MaxListed {
				sum.Divergences = append(sum.Divergences, o.v)
			}
		}
		if progress != nil {
			progress(sum.Total, max(total, sum.Total))
		}
	}
	if err := h.replayEach(ctx, r, af, fold); err != nil {
		return nil, err
	}
	sum.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	return sum, nil
}

// replayed is one attempt's replay: its verdict, or why it could not run.
type replayed struct {
	id  string
	v   *ReplayVerdict
	err error
}

// replayEach verifies and replays every attempt f selects on one worker
// per core while the next page is read, and passes the outcomes to fold in
// the order the attempts were read (so the divergences a summary lists do
// not depend on scheduling). At most replayPage attempts wait at each
// stage, so memory stays flat however many are replayed.
func (h *Host) replayEach(parent context.Context, r *replayer, f host.AttemptFilter, fold func(replayed)) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	type job struct {
		a    *host.Attempt
		verr error // the attempt's check against its place in the chain
		done chan replayed
	}
	jobs := make(chan job, replayPage)    // to the workers
	inOrder := make(chan job, replayPage) // to fold, as read
	var wg sync.WaitGroup
	for range goruntime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				j.done <- r.replayChecked(ctx, j.a, j.verr)
			}
		})
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(inOrder)
		defer close(jobs)
		readErr <- h.store.EachVerifiedAttempt(ctx, f, func(a *host.Attempt, verr error) error {
			j := job{a: a, verr: verr, done: make(chan replayed, 1)}
			select {
			case inOrder <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			jobs <- j
			return nil
		})
	}()
	for j := range inOrder {
		o := <-j.done
		if ctx.Err() != nil {
			break
		}
		fold(o)
	}
	cancel()
	for range inOrder { // let the reader finish
	}
	wg.Wait()
	if err := parent.Err(); err != nil {
		return err
	}
	if err := <-readErr; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// replayChecked replays one attempt if its check against its place in
// the chain (verr) found nothing.
func (r *replayer) replayChecked(ctx context.Context, a *host.Attempt, verr error) replayed {
	o := replayed{id: a.AttemptID, err: verr}
	if o.err != nil {
		return o
	}
	t, err := replay.FromAttempt(a)
	if err != nil {
		o.err = err
		return o
	}
	o.v, o.err = r.run(ctx, t)
	return o
}

// ErrInvalidTrace is matched by every refusal of a trace file.
var ErrInvalidTrace = replay.ErrInvalidTrace
