package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// settleWatch is a backend whose Finish of a task waits (up to a bound)
// until the worker has started another claim after the one that returned
// that task.
type settleWatch struct {
	host.Backend

	mu       sync.Mutex
	claims   int            // claims started
	claimSeq map[string]int // task id -> number of the claim that returned it
	finishes int
	waited   int // finishes that gave up waiting
}

func (s *settleWatch) Claim(ctx context.Context, runner string, now time.Time) (*host.TaskRecord, error) {
	s.mu.Lock()
	s.claims++
	seq := s.claims
	s.mu.Unlock()
	t, err := s.Backend.Claim(ctx, runner, now)
	if err == nil {
		s.mu.Lock()
		s.claimSeq[t.TaskID] = seq
		s.mu.Unlock()
	}
	return t, err
}

func (s *settleWatch) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		next := s.claims > s.claimSeq[taskID]
		if next || time.Now().After(deadline) {
			if !next {
				s.waited++
			}
			s.finishes++
			s.mu.Unlock()
			break
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	return s.Backend.Finish(ctx, taskID, in)
}

func enqueueHostTasks(t *testing.T, e env, n int) []string {
	t.Helper()
	ctx := context.Background()
	if err := e.backend.SetPackTaskTypes(ctx, "local.probe", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "probe.plain"}, Pack: "local.probe", Node: "probe.host"}}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "probe.plain", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.TaskID
	}
	return ids
}

// A worker claims its next task while it settles the last one (so the two
// writes share a commit): with Finish held until a claim arrives, a worker
// that claimed only after settling would stall every task for the bound.
func TestWorkerClaimsNextWhileSettling(t *testing.T) {
	e := newEnv(t, allGrants)
	ids := enqueueHostTasks(t, e, 6)
	w := &settleWatch{Backend: e.backend, claimSeq: map[string]int{}}
	e.d.cfg.Backend, e.d.cfg.Workers, e.d.cfg.Poll = w, 1, 10*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	waitTerminal(t, e, ids)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finishes != len(ids) {
		t.Fatalf("%d finishes for %d tasks", w.finishes, len(ids))
	}
	if w.waited != 0 {
		t.Fatalf("%d of %d settles waited for a claim that never came while settling", w.waited, len(ids))
	}
}

func waitTerminal(t *testing.T, e env, ids []string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			task, err := e.backend.Task(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status == host.TaskCompleted {
				break
			}
			if task.Status != host.TaskPending && task.Status != host.TaskRunning {
				t.Fatalf("task %s: %s (%s)", id, task.Status, task.LastError)
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s still %s", id, task.Status)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Stopping Run mid-queue leaves every task settled or untouched: tasks
// claimed ahead while others were settled run to their end too.
func TestRunStopLeavesNothingRunning(t *testing.T) {
	e := newEnv(t, allGrants)
	ids := enqueueHostTasks(t, e, 150)
	e.d.cfg.Workers = 4
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	for {
		n, err := e.backend.ListTasks(context.Background(), host.TaskFilter{Status: host.TaskCompleted})
		if err != nil {
			t.Fatal(err)
		}
		if len(n) >= 20 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	completed := 0
	for _, id := range ids {
		task, err := e.backend.Task(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		atts, err := e.backend.ListAttempts(context.Background(), host.AttemptFilter{TaskID: id})
		if err != nil {
			t.Fatal(err)
		}
		switch task.Status {
		case host.TaskCompleted:
			completed++
			if len(atts) != 1 {
				t.Errorf("completed task %s has %d attempts", id, len(atts))
			}
		case host.TaskPending:
			if len(atts) != 0 || task.AttemptCount != 0 {
				t.Errorf("pending task %s was attempted (%d attempts, count %d)", id, len(atts), task.AttemptCount)
			}
		default:
			t.Errorf("task %s is %s after stop", id, task.Status)
		}
	}
	if completed < 20 || completed == len(ids) {
		t.Fatalf("%d of %d completed: the stop did not land mid-queue", completed, len(ids))
	}
}

// failingFinish is a backend whose Finish fails, as a full disk makes it
// fail, while failing is set (or with err, an answer, once).
type failingFinish struct {
	host.Backend
	mu       sync.Mutex
	failing  int   // Finish calls still to fail with a store failure
	answer   error // returned by every Finish instead, if set
	finishes int
}

func (f *failingFinish) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	f.mu.Lock()
	f.finishes++
	fail, answer := f.failing > 0, f.answer
	if fail {
		f.failing--
	}
	f.mu.Unlock()
	if answer != nil {
		return nil, answer
	}
	if fail {
		return nil, host.Wrap("finish", taskID, errors.New("commit: disk I/O error: file too large"))
	}
	return f.Backend.Finish(ctx, taskID, in)
}

// A task the store fails to settle (a full disk) is settled once the store
// recovers, not left running until the next boot sweep; an answer (a
// conflict) is not retried, and the attempt is still recorded.
func TestSettleRetriesStoreFailures(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, allGrants)
	e.d.retryWait = time.Millisecond
	ids := enqueueHostTasks(t, e, 2)
	f := &failingFinish{Backend: e.backend, failing: 4}
	e.d.cfg.Backend = f
	claim := func() *host.TaskRecord {
		task, err := e.backend.Claim(ctx, "test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	e.d.RunTask(ctx, claim())
	if f.finishes != 5 {
		t.Fatalf("%d Finish calls, want 4 failures and the one that succeeded", f.finishes)
	}
	waitTerminal(t, e, ids[:1])
	if atts, err := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: ids[0]}); err != nil || len(atts) != 1 {
		t.Fatalf("%d attempts, %v", len(atts), err)
	}

	f.finishes, f.answer = 0, host.Errorf("finish", ids[1], host.ErrConflict, "task was cancelled")
	e.d.RunTask(ctx, claim())
	if f.finishes != 1 {
		t.Fatalf("%d Finish calls for an answer, want 1", f.finishes)
	}
	if atts, err := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: ids[1]}); err != nil || len(atts) != 1 {
		t.Fatalf("the unsettled task's attempt: %d recorded, %v", len(atts), err)
	}

	// A store that does not recover: retrying stops with ctx.
	f.answer, f.failing = nil, 1<<30
	ids = enqueueHostTasks(t, e, 1)
	stop, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { e.d.RunTask(stop, claim()); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunTask kept retrying after its context ended")
	}
	if task, _ := e.backend.Task(ctx, ids[0]); task.Status != host.TaskRunning {
		t.Fatalf("task %s after giving up, want running (for the boot sweep)", task.Status)
	}
}

// failingResolve is a backend whose Resolve fails as a broken disk would.
type failingResolve struct{ host.Backend }

func (failingResolve) Resolve(context.Context, string) (host.TaskTypeRoute, error) {
	return host.TaskTypeRoute{}, host.Wrap("resolve task type", "probe.plain", errors.New("disk I/O error"))
}

// A task whose route the store failed to read is a retryable failure, not
// a permanent one: the store, not the task, was at fault.
func TestResolveFailureIsRetryable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, allGrants)
	ids := enqueueHostTasks(t, e, 1)
	e.d.cfg.Backend = failingResolve{e.backend}
	task, err := e.backend.Claim(ctx, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.d.RunTask(ctx, task)
	got, err := e.backend.Task(ctx, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != host.TaskRetryableFailure {
		t.Fatalf("task %s (%s), want retryable_failure", got.Status, got.LastError)
	}
}

// failingClaim is a backend whose claims fail while failing is set.
type failingClaim struct {
	host.Backend
	failing atomic.Bool
	claims  atomic.Int64
}

func (f *failingClaim) Claim(ctx context.Context, runner string, now time.Time) (*host.TaskRecord, error) {
	f.claims.Add(1)
	if f.failing.Load() {
		return nil, host.Wrap("claim", "", errors.New("disk I/O error"))
	}
	return f.Backend.Claim(ctx, runner, now)
}

// While the store fails every claim, the workers say so once (not every
// poll of every worker) and poll less and less often; once it recovers
// they say that once and run the queue.
func TestClaimFailuresLoggedOnceAndBackedOff(t *testing.T) {
	e := newEnv(t, allGrants)
	ids := enqueueHostTasks(t, e, 5)
	f := &failingClaim{Backend: e.backend}
	f.failing.Store(true)
	var mu sync.Mutex
	var logs []string
	e.d.cfg.Backend, e.d.cfg.Workers, e.d.cfg.Poll = f, 4, 5*time.Millisecond
	e.d.cfg.Log = func(msg string, kv ...any) { mu.Lock(); logs = append(logs, msg); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	time.Sleep(400 * time.Millisecond)
	// 4 workers polling every 5 ms would have claimed ≈ 320 times.
	if n := f.claims.Load(); n > 100 {
		t.Errorf("%d claims in 400 ms of failures: no back-off", n)
	}
	f.failing.Store(false)
	waitTerminal(t, e, ids)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	count := func(prefix string) (n int) {
		for _, l := range logs {
			if strings.HasPrefix(l, prefix) {
				n++
			}
		}
		return n
	}
	if count("claim failed") != 1 || count("claims work again") != 1 {
		t.Fatalf("logs %q", logs)
	}
}

// failingStart is a backend whose dispatch lock and boot sweep fail, as a
// full disk makes them, the first few times.
type failingStart struct {
	host.Backend
	locks, sweeps atomic.Int64 // failures still to come
}

func (f *failingStart) AcquireDispatchLock(ctx context.Context, holder string, ttl time.Duration) (*host.DispatchLock, error) {
	if f.locks.Add(-1) >= 0 {
		return nil, host.Wrap("acquire dispatch lock", "", errors.New("disk I/O error"))
	}
	return f.Backend.AcquireDispatchLock(ctx, holder, ttl)
}

func (f *failingStart) ReclaimRunning(ctx context.Context, now time.Time) (int, error) {
	if f.sweeps.Add(-1) >= 0 {
		return 0, host.Wrap("reclaim", "", errors.New("disk I/O error"))
	}
	return f.Backend.ReclaimRunning(ctx, now)
}

// A store failing while the dispatcher starts (taking the lock, the boot
// sweep) is waited out, not a reason for Run to give up and serve to exit.
func TestRunWaitsOutStoreFailuresAtStart(t *testing.T) {
	e := newEnv(t, allGrants)
	ids := enqueueHostTasks(t, e, 3)
	f := &failingStart{Backend: e.backend}
	f.locks.Store(3)
	f.sweeps.Store(2)
	var mu sync.Mutex
	var logs []string
	e.d.cfg.Backend, e.d.cfg.LockTTL, e.d.retryWait = f, 100*time.Millisecond, time.Millisecond
	e.d.cfg.Log = func(msg string, kv ...any) { mu.Lock(); logs = append(logs, msg); mu.Unlock() }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			select {
			case err := <-done:
				t.Fatalf("Run gave up while tasks were waiting: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s not completed", id)
			}
			task, err := e.backend.Task(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status == host.TaskCompleted {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(logs, "\n")
	if strings.Count(joined, "dispatch lock failed") != 1 || strings.Count(joined, "boot sweep failed") != 1 {
		t.Fatalf("logs %q", logs)
	}
}
