package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/postgres"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// logLines collects a dispatcher's log lines.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) log(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(append([]any{msg}, kv...)...))
}

// count is how many lines contain s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// sharedStore is a PostgreSQL store (a store with leases) on a fresh
// database, with task type probe.plain routed to the probe pack's
// probe.host, and n such tasks enqueued.
func sharedStore(t *testing.T, lease time.Duration, n int) (*postgres.Store, []string) {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, pgtest.DSN(t), postgres.Options{LeaseTTL: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.SetPackTaskTypes(ctx, "local.probe", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "probe.plain"}, Pack: "local.probe", Node: "probe.host"}}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		task, err := s.Enqueue(ctx, host.TaskIntent{TaskType: "probe.plain", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.TaskID
	}
	return s, ids
}

// On a store with leases, two dispatchers both claim (both dispatching,
// neither a standby); the task a dead runner claimed is reclaimed once its
// lease expired and run again, and that runner's late settlement is
// refused; both reclaim the host's expired work (never as if alone), and
// the singleton chores run on one of them only, the one whose Observer
// was told it holds the dispatch lock.
func TestSharedDispatchersBothClaim(t *testing.T) {
	ctx := context.Background()
	s, ids := sharedStore(t, time.Second, 20)
	ghost, err := s.Claim(ctx, "ghost", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	chores, reclaims, alone := map[string]int{}, map[string]int{}, 0
	held, heldOnce := map[string]bool{}, map[string]bool{}
	arch := probePack(t, allGrants)
	var ds []*Dispatcher
	for _, runner := range []string{"one", "two"} {
		ds = append(ds, newDispatcherOn(t, Config{Backend: s, RunnerID: runner, LockTTL: time.Second,
			Observer: lockObserver(func(h bool) {
				mu.Lock()
				defer mu.Unlock()
				held[runner], heldOnce[runner] = h, heldOnce[runner] || h
				if held["one"] && held["two"] {
					t.Error("both nodes' Observers say they hold the dispatch lock")
				}
			}),
			Chores: func(context.Context) { mu.Lock(); chores[runner]++; mu.Unlock() },
			Reclaim: func(_ context.Context, a bool) {
				mu.Lock()
				reclaims[runner]++
				if a {
					alone++
				}
				mu.Unlock()
			}}, arch, echoAdapter))
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(ds))
	for _, d := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- d.Run(runCtx) }()
	}
	waitFor(t, "both dispatchers to dispatch", func() bool { return ds[0].HoldsLock() && ds[1].HoldsLock() })
	waitFor(t, "every task to complete", func() bool {
		for _, id := range ids {
			task, err := s.Task(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if task.Status != host.TaskCompleted {
				return false
			}
		}
		return true
	})
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if ds[0].HoldsLock() || ds[1].HoldsLock() {
		t.Error("a stopped dispatcher still says it dispatches")
	}
	if len(chores) != 1 || alone != 0 || reclaims["one"] == 0 || reclaims["two"] == 0 {
		t.Errorf("chores ran on %v, reclaims %v (%d as if alone); want chores on one node, reclaims on both, none alone", chores, reclaims, alone)
	}
	for runner := range chores {
		if !heldOnce[runner] {
			t.Errorf("chores ran on %s, whose Observer was never told it holds the lock", runner)
		}
	}
	if held["one"] || held["two"] {
		t.Errorf("a stopped dispatcher's Observer still says it holds the lock: %v", held)
	}
	evs, err := s.Events(ctx, host.EventFilter{TaskID: ghost.TaskID, Type: host.EventBootSweepReclaimed})
	if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"reason":"lease_expired"`) {
		t.Fatalf("the dead runner's task was reclaimed: %v %v", evs, err)
	}
	_, err = s.Finish(ctx, ghost.TaskID, host.FinishInput{Claimed: ghost, Outcome: host.TaskOutcome{Status: host.TaskCompleted, MachineStatus: host.MachineOK}})
	if !errors.Is(err, host.ErrConflict) {
		t.Fatalf("the dead runner's late settlement: %v", err)
	}
}

// A heartbeat that finds the lease lost (another node reclaimed the task)
// says so once, and stops renewing it.
func TestHeartbeatLostLeaseSaidOnce(t *testing.T) {
	ctx := context.Background()
	s, _ := sharedStore(t, 300*time.Millisecond, 1)
	task, err := s.Claim(ctx, "other", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{}
	d := New(Config{Backend: s, RunnerID: "me", Log: logs.log})
	release := d.hold(task)
	defer release()
	hbCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); d.heartbeats(hbCtx, s) }()
	waitFor(t, "the lost lease to be let go", func() bool {
		d.leases.mu.Lock()
		defer d.leases.mu.Unlock()
		return len(d.leases.held) == 0
	})
	stop()
	<-done
	if n := logs.count("lost the lease"); n != 1 {
		t.Fatalf("said %d times: %v", n, logs.lines)
	}
}

// waitFor polls cond until it holds; the deadline is a hang guard.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockObserver is an Observer told only of the dispatch lock.
type lockObserver func(held bool)

func (lockObserver) AttemptDone(host.AttemptStats)   {}
func (lockObserver) TaskStarted(host.TaskStats)      {}
func (lockObserver) TaskFinished(host.TaskStats)     {}
func (o lockObserver) DispatchLock(held bool)        { o(held) }
func (lockObserver) WriterCommit(int, time.Duration) {}

// releaseFails is a Backend whose dispatch lock cannot be released; only
// ReleaseDispatchLock is called on it.
type releaseFails struct{ host.Backend }

func (releaseFails) ReleaseDispatchLock(context.Context, string) error {
	return errors.New("disk I/O error")
}

// A release of the dispatch lock that fails is logged, with its error:
// the lock then expires on its own, and the log says why a standby waited.
func TestReleaseLockFailureLogged(t *testing.T) {
	logs := &logLines{}
	d := New(Config{Backend: releaseFails{}, RunnerID: "me", Log: logs.log})
	c := &choreLock{d: d}
	c.held.Store(true)
	c.release()
	if n := logs.count("releasing the dispatch lock failed"); n != 1 || logs.count("disk I/O error") != 1 {
		t.Fatalf("logged %d times: %v", n, logs.lines)
	}
	if c.held.Load() {
		t.Fatal("the lock is still marked held")
	}
}
