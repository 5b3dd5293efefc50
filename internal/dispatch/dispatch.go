package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// PackSource opens installed packs: internal/packindex.Index, the one
// in-memory index the Host also lists and resolves packs with (tests pass
// a map).
type PackSource interface {
	// Open returns the archive of the installed pack ref names (a name, for
	// the newest version, or name@version). When nothing is installed under
	// ref the error wraps ErrPackNotInstalled.
	Open(ctx context.Context, ref string) (*packs.Archive, error)
}

// HeapFloor is the heap floor (internal/heapfloor) for a process whose
// main work is a Dispatcher's: measured with BenchmarkAttempts, it lifts
// attempts with full evidence by about 45 %, and 32 MiB gets most of that.
const HeapFloor = 64 << 20

// ErrPackNotInstalled is wrapped by PackSource when a reference names no
// installed pack.
var ErrPackNotInstalled = host.ErrPackNotInstalled

// Config configures a Dispatcher.
type Config struct {
	Backend  host.Backend
	Packs    PackSource
	Runtime  *runtime.Runtime
	Adapters *adapters.Registry // nil: no adapters
	// PackConfig is each pack's configuration object (config_get), by pack
	// name, read once by the Host (config.json); may be nil.
	PackConfig map[string]json.RawMessage
	// RunnerID names this dispatcher in claims and attempts.
	RunnerID string
	// Workers is how many tasks run at once (default 2).
	Workers int
	// Poll is how long an idle worker waits before claiming again
	// (default 50ms); Wake shortens it.
	Poll time.Duration
	// LockTTL is how long the dispatch lock lasts without renewal (default
	// 5s; renewed every third of it). After a crash, another dispatcher
	// takes over within this long.
	LockTTL time.Duration
	// Log receives one line per notable event; may be nil.
	Log func(msg string, kv ...any)
	// Reclaim, when set, continues the host's own work beside tasks that
	// a stopped (or stalled) process left: its openwop runs. Run calls it
	// once its boot sweep is done, before it claims: with alone true when
	// it holds the store's dispatch lock (any other process on the store
	// is a standby, so whatever was left running was left by one that
	// stopped); on a store with leases, with alone false, at start and
	// then every LeaseTTL/2, as any node may (the work's leases say what
	// was left).
	Reclaim func(ctx context.Context, alone bool)
	// Chores, when set, is the host's singleton chores (sweeping expired
	// memory): Run calls it while it holds the dispatch lock, once it
	// took the lock and then every ChoreEvery (default 1m). Only one
	// process on a store runs them at a time.
	Chores     func(ctx context.Context)
	ChoreEvery time.Duration
	// BeforeFire, when set, runs before due schedules are fired (the
	// host's quotas read the store's counts then); may be nil.
	BeforeFire func(ctx context.Context)
	// CheckFollowUps, when set, is asked before a completed task's n
	// follow-ups (queue_enqueue, taskOutcome.follow_up_tasks) of tenant
	// are enqueued: an error refuses them all and fails the task with it,
	// as an invalid follow-up does (the host's queued-tasks quota).
	CheckFollowUps func(ctx context.Context, tenant string, n int) error
	// CheckIntent checks a follow-up a node stages against the home
	// (skills, adapter, profile, model: the Host's CheckIntent); may be nil.
	CheckIntent func(ctx context.Context, in *host.TaskIntent) error
	// Observer is told of every attempt, task start and finish, and change
	// of the dispatch lock (metrics, logs); may be nil.
	Observer host.Observer
	// Outbound performs http_request calls; nil: a client with the
	// default limits, the system resolver and roots, reporting to
	// Observer if it has an OutboundRequest method.
	Outbound *outbound.Client
}

// outboundObserver is what an Observer implements to see outbound
// requests (per-destination metrics).
type outboundObserver interface {
	OutboundRequest(grantHost string, sent, received int64, d time.Duration, err error)
}

// Dispatcher runs tasks from the queue. It is also what serves direct
// invocations (CLI invoke, POST /v1/invoke), so every invocation is
// recorded the same way.
type Dispatcher struct {
	cfg  Config
	wake chan struct{}
	// haveLock: the dispatcher may claim (it holds the dispatch lock, or
	// runs on a store with leases).
	haveLock atomic.Bool
	// leases are the tasks running here under a lease (a store with
	// leases), renewed by heartbeats.
	leases leaseSet
	// retryWait is the first wait before settling a task again after the
	// store failed to (see retry).
	retryWait time.Duration
	// claimsFailing: claims are failing (logged once until they work).
	claimsFailing atomic.Bool
	// running counts the tasks being run; ran counts those claimed since
	// the dispatcher was last idle (0: idle, dispatch_idle said).
	running, ran atomic.Int64
	// sched tells when the next recurring schedule is due.
	sched schedules

	mu      sync.Mutex
	modules map[loadKey]*loaded       // loaded modules
	loading map[loadKey]chan struct{} // keys being loaded; closed when done
}

// loadKey names a loaded module: the archive, the module in it, and the
// limits it was loaded with (a struct, so a lookup allocates nothing).
type loadKey struct {
	archive, path string
	limits        runtime.Limits
}

type loaded struct {
	mod      *runtime.Module
	manifest *packs.Manifest
	module   packs.Module
	// What every attempt of the module records, worked out once.
	pack       string         // name@version; "" for a bare module
	archive    string         // the archive's sha256; "" for a bare module
	arch       *packs.Archive // the archive itself (asset_read); nil for a bare module
	abiVersion string
	limits     json.RawMessage // the limits the module runs under
}

func newLoaded(mod *runtime.Module, manifest *packs.Manifest, module packs.Module) *loaded {
	info := mod.Info()
	l := &loaded{mod: mod, manifest: manifest, module: module, abiVersion: fmt.Sprint(info.ABIVersion)}
	if manifest.Version != "" {
		l.pack = manifest.Name + "@" + manifest.Version
	}
	l.limits, _ = json.Marshal(info.Limits)
	return l
}

// New returns a Dispatcher.
func New(cfg Config) *Dispatcher {
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = 5 * time.Second
	}
	if cfg.ChoreEvery <= 0 {
		cfg.ChoreEvery = time.Minute
	}
	if cfg.RunnerID == "" {
		cfg.RunnerID = "packrun-" + newID()[:8]
	}
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Outbound == nil {
		oc := outbound.Config{}
		if o, ok := cfg.Observer.(outboundObserver); ok {
			oc.Observe = o.OutboundRequest
		}
		cfg.Outbound = outbound.New(oc)
	}
	return &Dispatcher{cfg: cfg, wake: make(chan struct{}, 1), retryWait: 100 * time.Millisecond, modules: map[loadKey]*loaded{}}
}

// HoldsLock reports whether this dispatcher is dispatching: it holds the
// store's dispatch lock (false while it waits as a standby, and before
// Run), or, on a store with leases (host.Leases), Run is claiming, as
// every node on it does.
func (d *Dispatcher) HoldsLock() bool { return d.haveLock.Load() }

type nopObserver struct{}

func (nopObserver) AttemptDone(host.AttemptStats)   {}
func (nopObserver) TaskStarted(host.TaskStats)      {}
func (nopObserver) TaskFinished(host.TaskStats)     {}
func (nopObserver) DispatchLock(bool)               {}
func (nopObserver) WriterCommit(int, time.Duration) {}

// observeAttempt tells the observer of an attempt; it allocates only for
// an attempt that breached a limit.
func (d *Dispatcher) observeAttempt(l *loaded, res *runtime.Result, svc *services) {
	st := host.AttemptStats{Pack: l.manifest.Name, Outcome: string(res.Outcome), Duration: res.Duration}
	for _, e := range append(svc.httpBreaches(), res.Events...) {
		if e.Type == runtime.EventCapBreached {
			st.Breaches = append(st.Breaches, e.Kind)
		}
	}
	d.cfg.Observer.AttemptDone(st)
}

// Wake tells idle workers a task may be available.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// InvokeRequest is one invocation of a node outside the queue: the one
// request type of POST /v1/invoke (internal/api), the Host's Invoke
// methods (packrun.InvokeRequest is this type) and the Dispatcher, so a
// request goes down the layers without being converted.
type InvokeRequest struct {
	// Pack is the installed pack (NAME, NAME@VERSION or NAME@RANGE) that
	// Invoke runs; the Host's Invoke methods take their target as an
	// argument and set it.
	Pack string
	// Node is the node's typeId; it may be empty when there is one node.
	Node string
	// Input is the node's input (default {}).
	Input json.RawMessage
	// Tenant is the tenant the node runs for (default "default").
	Tenant string
	// RunID seeds openwop_random with NodeID and Attempt (default: a new
	// random id).
	RunID string
	// NodeID is the node's id within the run (default: the typeId).
	NodeID string
	// Attempt is the attempt number (default 1; it must not be negative).
	Attempt int
	// AttemptGiven uses Attempt as given, 0 included: openwop counts
	// nodeContext.attempt from 0, and RFC 0008 §G seeds openwop_random
	// per (runId, nodeId, attempt), so attempt 0 has a stream of its own.
	AttemptGiven bool
	// Resume holds the values the node's next openwop_interrupt calls
	// return, in order.
	Resume []json.RawMessage
	// Limits override the pack's own (zero fields keep them); each must be
	// within the host maxima (runtime.MaxLimits): see Check.
	Limits runtime.Limits
	// Trust verifies a .pack file target (the Host's Invoke; ignored
	// otherwise).
	Trust packs.Files
}

// Check validates what can be checked before anything runs, and defaults
// the tenant. Its errors are the request's fault, one line each.
func (req *InvokeRequest) Check() error {
	if req.Tenant == "" {
		req.Tenant = host.DefaultTenant
	}
	if err := host.CheckTenant("invoke", req.Tenant); err != nil {
		return err
	}
	if req.Attempt < 0 {
		return fmt.Errorf("attempt %d: must be 0 or more", req.Attempt)
	}
	if m := req.Limits.MemoryBytes; m != 0 && m < 64<<10 {
		return fmt.Errorf("memory limit %d bytes is below one 64 KiB page", m)
	}
	if err := req.Limits.CheckMax(runtime.MaxLimits()); err != nil {
		return err
	}
	if len(req.Input) > 0 && !json.Valid(req.Input) {
		return fmt.Errorf("input is not valid JSON")
	}
	for i, r := range req.Resume {
		if !json.Valid(r) {
			return fmt.Errorf("resume value %d is not valid JSON", i+1)
		}
	}
	return nil
}

// AttemptNumber is the attempt number the node sees: as given when
// AttemptGiven, else at least 1.
func (req *InvokeRequest) AttemptNumber() int {
	if req.AttemptGiven {
		return req.Attempt
	}
	return max(req.Attempt, 1)
}

// invocation is what the runtime is asked to run for req.
func (req *InvokeRequest) invocation(node, runID string) runtime.Invocation {
	return runtime.Invocation{Node: node, Input: req.Input, RunID: runID, NodeID: req.NodeID, TenantID: req.Tenant,
		Attempt: req.AttemptNumber(), AttemptGiven: true, Resume: req.Resume}
}

// Invoke runs one node of an installed pack outside the queue and records
// the attempt.
func (d *Dispatcher) Invoke(ctx context.Context, req InvokeRequest) (*host.Attempt, *runtime.Result, error) {
	arch, err := d.cfg.Packs.Open(ctx, req.Pack)
	if err != nil {
		return nil, nil, err
	}
	return d.InvokeArchive(ctx, arch, req)
}

// InvokeArchive runs one node of a verified pack archive and records the
// attempt.
func (d *Dispatcher) InvokeArchive(ctx context.Context, arch *packs.Archive, req InvokeRequest) (*host.Attempt, *runtime.Result, error) {
	node := req.Node
	if node == "" {
		if len(arch.Manifest.Nodes) != 1 {
			return nil, nil, fmt.Errorf("%w: %s has %d nodes; name one", runtime.ErrUnknownNode, arch.Manifest.Name, len(arch.Manifest.Nodes))
		}
		node = arch.Manifest.Nodes[0].TypeID
	}
	l, err := d.load(ctx, arch, node, req.Limits)
	if err != nil {
		return nil, nil, err
	}
	runID := req.RunID
	if runID == "" {
		runID = newID()
	}
	att, res, svc, err := d.run(ctx, l, node, req.invocation(node, runID), "", nil, true)
	if err != nil {
		return att, res, err
	}
	if svc.refused != nil {
		return att, res, &InputError{AttemptID: att.AttemptID, Node: node, Path: svc.refused.Path, Reason: svc.refused.Reason}
	}
	// Outside the queue there is no task to settle: the tasks a completed
	// invocation enqueued, the sensor events it reported and the messages
	// it published are applied now; a failed or suspended one's are
	// dropped. (Its outcome's external_messages are ignored, as outside a
	// task there is no outbox.)
	if res.Outcome == abi.Completed {
		for _, intent := range svc.staged {
			if intent.Source == "" || strings.HasPrefix(intent.Source, "task:") {
				intent.Source = "attempt:" + att.AttemptID
			}
			if _, err := d.cfg.Backend.Enqueue(ctx, intent, host.EnqueueOptions{}); err != nil {
				return att, res, fmt.Errorf("apply follow-up task of attempt %s: %w", att.AttemptID, err)
			}
		}
		evs, err := reportedEvents(l, node, att.Output, svc)
		if err != nil {
			return att, res, fmt.Errorf("sensor events of attempt %s: %w", att.AttemptID, err)
		}
		if len(evs) > 0 {
			opts := host.SensorEventOptions{Tenant: req.Tenant, Origin: "attempt:" + att.AttemptID}
			if _, err := d.cfg.Backend.ApplySensorEvents(ctx, evs, opts, att.AttemptID); err != nil {
				return att, res, fmt.Errorf("apply sensor events of attempt %s: %w", att.AttemptID, err)
			}
		}
		// Its message_publish messages are published one by one, in
		// order; the first the bus refuses stops the rest.
		for i := range svc.messages {
			if _, err := d.cfg.Backend.PublishMessage(ctx, &svc.messages[i]); err != nil {
				return att, res, fmt.Errorf("publish message %s of attempt %s: %w", svc.messages[i].MessageID, att.AttemptID, err)
			}
		}
		if len(svc.staged) > 0 || len(evs) > 0 || len(svc.messages) > 0 {
			d.Wake()
		}
	}
	return att, res, err
}

// InvokeModule runs a node of a bare module (no pack, so nothing is
// granted) and records the attempt (req.Pack is not used).
func (d *Dispatcher) InvokeModule(ctx context.Context, m *runtime.Module, req InvokeRequest) (*host.Attempt, *runtime.Result, error) {
	runID := req.RunID
	if runID == "" {
		runID = newID()
	}
	info := m.Info()
	l := newLoaded(m, &packs.Manifest{Name: info.PackName}, packs.Module{Path: info.Name, SHA256: info.SHA256})
	att, res, _, err := d.run(ctx, l, req.Node, req.invocation(req.Node, runID), "", nil, true)
	return att, res, err
}

// load compiles the module serving node, once per archive, module and
// limits.
func (d *Dispatcher) load(ctx context.Context, arch *packs.Archive, node string, override runtime.Limits) (*loaded, error) {
	m := arch.Manifest
	mod, ok := m.NodeModule(node)
	if !ok {
		var nodes []string
		for _, n := range m.Nodes {
			nodes = append(nodes, n.TypeID)
		}
		return nil, fmt.Errorf("%w: %q is not a node of %s@%s (nodes: %s)", runtime.ErrUnknownNode, node, m.Name, m.Version, strings.Join(nodes, ", "))
	}
	key := loadKey{arch.SHA256, mod.Path, override}
	// One load per key at a time: workers that ask for a module already
	// being loaded wait for it rather than compile it again.
	for {
		d.mu.Lock()
		if l, ok := d.modules[key]; ok {
			d.mu.Unlock()
			return l, nil
		}
		wait, busy := d.loading[key]
		if !busy {
			done := make(chan struct{})
			if d.loading == nil {
				d.loading = map[loadKey]chan struct{}{}
			}
			d.loading[key] = done
			d.mu.Unlock()
			defer func() {
				d.mu.Lock()
				delete(d.loading, key)
				d.mu.Unlock()
				close(done)
			}()
			break
		}
		d.mu.Unlock()
		select {
		case <-wait: // loaded, or failed: look again
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := CheckABI(m); err != nil {
		return nil, err
	}
	wasm, _ := arch.File(mod.Path)
	rm, err := d.cfg.Runtime.Load(ctx, wasm, LoadOptions(m, mod, override))
	if err != nil {
		return nil, err
	}
	l := newLoaded(rm, m, mod)
	l.archive, l.arch = arch.SHA256, arch
	d.mu.Lock()
	d.modules[key] = l
	d.mu.Unlock()
	return l, nil
}

// run invokes one attempt and, if record is set, records it. (A task's
// attempt is recorded by the Finish that settles the task, in one write.)
// b is what a task runs as (nil outside the queue): its nodeContext.agent
// goes to the node and into the attempt's diagnostics.
func (d *Dispatcher) run(ctx context.Context, l *loaded, node string, inv runtime.Invocation, taskID string, b *bundle, record bool) (*host.Attempt, *runtime.Result, *services, error) {
	// Time-ordered, like the store's own ids: attempts are indexed by id,
	// and random ids would scatter every insert across the index.
	attemptID := host.NewID("att")
	cfg := d.cfg.PackConfig[l.manifest.Name]
	svc := newServices(binding{
		backend: d.cfg.Backend, adapters: d.cfg.Adapters, grants: l.manifest.Grants, config: cfg, archive: l.arch,
		tenant: inv.TenantID, taskID: taskID, attemptID: attemptID, node: node, bundle: b, checkIntent: d.cfg.CheckIntent,
		outbound: d.cfg.Outbound,
	})
	if b != nil {
		inv.Agent = b.agent
	}
	inv.Services = svc
	// The attempt number recorded is the one the node is handed.
	if !inv.AttemptGiven {
		inv.Attempt, inv.AttemptGiven = max(inv.Attempt, 1), true
	}
	started := time.Now().UTC()
	res, err := d.invokeChecked(ctx, l, node, inv, svc)
	if err != nil {
		return nil, nil, nil, err
	}
	d.observeAttempt(l, res, svc)
	att := attemptOf(res, svc)
	att.AttemptID, att.TaskID, att.RunnerID = attemptID, taskID, d.cfg.RunnerID
	att.Pack, att.ModuleSHA256, att.Node = l.pack, l.module.SHA256, res.Node
	att.Tenant, att.RunID, att.Attempt = inv.TenantID, inv.RunID, inv.Attempt
	att.ABIVersion = l.abiVersion
	att.Input = svc.redactor.Bytes(orEmptyObject(inv.Input))
	att.StartedAt, att.EndedAt = started, started.Add(res.Duration)
	att.Limits = l.limits // shared by the module's attempts: read only
	if svc.redactor.Len() == 0 {
		// Nothing was redacted, so every JSON field is as it was
		// validated: the input by the runtime where it entered, the
		// output and interrupt by the runtime's decoder, the rest
		// marshalled here. Put the guest's in stored form once, and spare
		// the store validating them again.
		att.Input, att.Output, att.Interrupt = evidence.CompactJSON(att.Input), evidence.CompactJSON(att.Output), evidence.CompactJSON(att.Interrupt)
		if att.Error != nil {
			att.Error.Details = evidence.CompactJSON(att.Error.Details)
		}
		att.Compact = true
	}
	if !record {
		return att, res, svc, nil
	}
	if err := d.cfg.Backend.RecordAttempt(ctx, att); err != nil {
		return nil, res, nil, fmt.Errorf("record attempt %s: %w", attemptID, err)
	}
	return att, res, svc, nil
}

// invokeChecked invokes the node under its contract: an input the node's
// inputSchema refuses is a failed result without running anything (noted
// in svc.refused), an output its outputSchema refuses fails the attempt.
func (d *Dispatcher) invokeChecked(ctx context.Context, l *loaded, node string, inv runtime.Invocation, svc *services) (*runtime.Result, error) {
	c, err := ContractOf(l.archive, l.manifest, node)
	if err != nil {
		return nil, err
	}
	if res, v := c.checkInput(node, inv.Input); res != nil {
		svc.refused = v
		return res, nil
	}
	res, err := l.mod.Invoke(ctx, inv)
	if err != nil {
		return nil, err
	}
	c.CheckOutput(res)
	return res, nil
}

func orEmptyObject(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

// attemptOf turns a runtime result into the evidence record, with secrets
// read during the attempt redacted everywhere they could appear.
func attemptOf(res *runtime.Result, svc *services) *host.Attempt {
	r := svc.redactor
	a := &host.Attempt{
		Outcome:   res.Outcome,
		Output:    r.Bytes(res.Output),
		Interrupt: r.Bytes(res.Interrupt),
		Error:     res.Error,
		Stdout:    r.Bytes(res.Stdout),
		Stderr:    r.Bytes(res.Stderr),
	}
	if a.Error != nil {
		e := *a.Error
		e.Message = r.String(e.Message)
		a.Error = &e
	}
	a.ExitStatus, a.RetryClass = classify(res)
	a.Logs = r.Bytes(marshalOrNull(res.Logs))
	if events := append(svc.httpBreaches(), res.Events...); len(events) > 0 {
		a.Events, _ = json.Marshal(events)
	}
	a.Trace = r.Bytes(marshalOrNull(res.Trace))
	svc.mu.Lock()
	if len(svc.adapterCalls) > 0 {
		calls, _ := json.Marshal(svc.adapterCalls)
		a.AdapterCalls = r.Bytes(calls)
	}
	a.Diagnostics = r.Bytes(diagnostics(res, svc))
	svc.mu.Unlock()
	return a
}

// marshalOrNull is json.Marshal of a slice, without reflection for a nil
// one (no logs, no host calls traced: most attempts).
func marshalOrNull[S ~[]E, E any](v S) []byte {
	if v == nil {
		return []byte("null")
	}
	b, _ := json.Marshal(v)
	return b
}

// diagnostics is the attempt's diagnostics object as json.Marshal writes
// it (keys sorted). The common case, host calls and memory alone, is
// written directly: a map marshalled by reflection cost more than the rest
// of the record's fields together. The caller holds svc.mu.
func diagnostics(res *runtime.Result, svc *services) []byte {
	if len(svc.records) == 0 && len(svc.staged) == 0 && len(svc.messages) == 0 && svc.followUpsRefused == 0 &&
		(svc.b.bundle == nil || svc.b.bundle.agent == nil) && len(res.Truncated) == 0 {
		b := make([]byte, 0, 64)
		b = append(b, `{"hostCalls":`...)
		b = strconv.AppendInt(b, int64(res.HostCalls), 10)
		b = append(b, `,"memoryBytes":`...)
		b = strconv.AppendUint(b, res.MemoryBytes, 10)
		return append(b, '}')
	}
	diag := map[string]any{"hostCalls": res.HostCalls, "memoryBytes": res.MemoryBytes}
	if len(svc.records) > 0 {
		diag["records"] = svc.records
	}
	if len(svc.staged) > 0 {
		diag["stagedFollowUps"] = len(svc.staged)
	}
	if len(svc.messages) > 0 {
		diag["stagedMessages"] = len(svc.messages)
	}
	if svc.followUpsRefused > 0 {
		diag["followUpsRefused"] = map[string]any{"count": svc.followUpsRefused, "reason": "result_policy.allow_follow_up_tasks is false"}
	}
	if b := svc.b.bundle; b != nil && b.agent != nil {
		diag["agent"] = b.agent // nodeContext.agent as handed over: replay hands over the same
	}
	if len(res.Truncated) > 0 {
		diag["truncated"] = res.Truncated
	}
	d, _ := json.Marshal(diag)
	return d
}

// classify maps a result to the spec's exit status and retry class: a
// time-limit breach is a timeout and worth retrying, a host error is worth
// retrying, anything else the module did is permanent.
func classify(res *runtime.Result) (host.ExitStatus, host.RetryClass) {
	switch res.Outcome {
	case abi.Completed, abi.Suspended:
		return host.ExitOK, host.RetryNone
	}
	if b := res.Breach(); b != nil && b.Kind == abi.CapTime {
		return host.ExitTimeout, host.RetryRetryable
	}
	if res.Error != nil && res.Error.Code == abi.CodeHostError {
		return host.ExitError, host.RetryRetryable
	}
	return host.ExitError, host.RetryPermanent
}
