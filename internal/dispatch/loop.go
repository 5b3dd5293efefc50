package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/runtime"
)

// Run is the dispatcher loop: it takes the store's dispatch lock (waiting
// while another dispatcher holds it), reclaims tasks a crash left running,
// then claims and runs tasks with Config.Workers workers until ctx is done.
// On cancellation it stops claiming, lets in-flight tasks finish (they run
// on their own context), releases the lock and returns nil.
//
// On a store with leases (host.Leases: several nodes on one database) it
// claims without the dispatch lock instead: see runShared.
func (d *Dispatcher) Run(ctx context.Context) error {
	b := d.cfg.Backend
	if l, ok := b.(host.Leases); ok {
		return d.runShared(ctx, l)
	}
	// Wait for the lock while another dispatcher holds it (said once), and
	// while the store fails to answer (a full disk: retry says so once):
	// neither is a reason to give up.
	waiting := false
	for {
		err := d.retry(ctx.Done(), "dispatch lock", "", func() error {
			_, err := b.AcquireDispatchLock(ctx, d.cfg.RunnerID, d.cfg.LockTTL)
			return err
		})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, host.ErrLocked) {
			return fmt.Errorf("dispatch lock: %w", err)
		}
		if !waiting {
			waiting = true
			d.cfg.Log("dispatch lock held by another dispatcher; waiting")
			d.cfg.Observer.DispatchLock(false)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d.cfg.LockTTL / 10):
		}
	}
	defer d.releaseLock(b)
	if swept, err := d.bootSweep(ctx, b.ReclaimRunning, "boot sweep reclaimed tasks left running"); !swept {
		return err
	}
	if d.cfg.Reclaim != nil {
		d.cfg.Reclaim(ctx, true)
	}

	// Renew the lock while running. Should renewal ever fail (a stall
	// longer than the TTL let another dispatcher take it), workers stop
	// claiming until the lock is ours again.
	d.haveLock.Store(true)
	d.cfg.Observer.DispatchLock(true)
	defer d.haveLock.Store(false)
	renewCtx, stopRenew := context.WithCancel(context.Background())
	defer stopRenew()
	go d.chores(renewCtx, d.haveLock.Load)
	go func() {
		t := time.NewTicker(d.cfg.LockTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-renewCtx.Done():
				return
			case <-t.C:
				_, err := b.AcquireDispatchLock(renewCtx, d.cfg.RunnerID, d.cfg.LockTTL)
				if renewCtx.Err() != nil {
					return
				}
				if err != nil && d.haveLock.Swap(false) {
					d.cfg.Log("lost the dispatch lock; not claiming until it is back", "error", err)
					d.cfg.Observer.DispatchLock(false)
				} else if err == nil && !d.haveLock.Swap(true) {
					d.cfg.Log("dispatch lock regained")
					d.cfg.Observer.DispatchLock(true)
				}
			}
		}
	}()

	d.runWorkers(ctx)
	return nil
}

// chores runs Config.Chores now and every ChoreEvery while held says the
// dispatch lock is this dispatcher's, until ctx is done.
func (d *Dispatcher) chores(ctx context.Context, held func() bool) {
	if d.cfg.Chores == nil {
		return
	}
	run := func() {
		if held() && ctx.Err() == nil {
			d.cfg.Chores(ctx)
		}
	}
	run()
	every(ctx, d.cfg.ChoreEvery, run)
}

// bootSweep settles the tasks reclaim finds (as of now), trying again
// while the store fails, and says how many with msg. If it could not
// (swept false), Run returns err: nil when ctx was done first.
func (d *Dispatcher) bootSweep(ctx context.Context, reclaim func(context.Context, time.Time) (int, error), msg string) (swept bool, err error) {
	var n int
	err = d.retry(ctx.Done(), "boot sweep", "", func() (err error) {
		n, err = reclaim(ctx, time.Now())
		return err
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, fmt.Errorf("boot sweep: %w", err)
	}
	if n > 0 {
		d.cfg.Log(msg, "count", n)
	}
	return true, nil
}

// runWorkers runs Config.Workers workers until they are all done.
func (d *Dispatcher) runWorkers(ctx context.Context) {
	var wg sync.WaitGroup
	for i := 0; i < d.cfg.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.worker(ctx)
		}()
	}
	wg.Wait()
}

// claimed is the result of a claim made in the background.
type claimed struct {
	t   *host.TaskRecord
	err error
}

func (d *Dispatcher) worker(ctx context.Context) {
	// next is a claim made while the previous task was being settled: the
	// two writes usually share a commit, so a worker waits for one durable
	// commit per task instead of two.
	var next chan claimed
	failures := 0 // claims failed in a row (not "nothing to claim")
	for {
		var t *host.TaskRecord
		var err error
		if next != nil {
			c := <-next
			t, err, next = c.t, c.err, nil
		} else {
			if ctx.Err() != nil {
				return
			}
			if !d.haveLock.Load() {
				select {
				case <-ctx.Done():
				case <-time.After(d.cfg.Poll):
				}
				continue
			}
			t, err = d.claim(ctx)
		}
		wait := d.cfg.Poll
		switch {
		case err == nil || errors.Is(err, host.ErrEmpty):
			if failures > 0 && d.claimsFailing.CompareAndSwap(true, false) {
				d.cfg.Log("claims work again", "failed", failures)
			}
			failures = 0
		case ctx.Err() == nil:
			// The store is failing (a full disk...): say so once, not
			// every poll of every worker, and poll less and less often.
			if d.claimsFailing.CompareAndSwap(false, true) {
				d.cfg.Log("claim failed; retrying until the store recovers", "error", err)
			}
			failures++
			wait = min(d.cfg.Poll<<min(failures, 10), 5*time.Second)
		}
		if err != nil {
			if errors.Is(err, host.ErrEmpty) {
				d.idle(ctx)
			}
			select {
			case <-ctx.Done():
			case <-d.wake:
			case <-time.After(wait):
			}
			continue
		}
		// A claimed task runs to its end even during shutdown, so it is
		// settled rather than left running; so does one claimed while this
		// one was settled.
		d.runTask(context.WithoutCancel(ctx), ctx.Done(), t, func() {
			if ctx.Err() != nil || !d.haveLock.Load() {
				return
			}
			ch := make(chan claimed, 1)
			next = ch
			go func() {
				t, err := d.claim(ctx)
				ch <- claimed{t, err}
			}()
		})
		d.running.Add(-1)
	}
}

// claim claims the next task. A claim counts as running from its start
// until it finds nothing or its task has run (the worker's
// running.Add(-1)), so that the dispatcher is never seen idle between a
// task and the one claimed while it was settled.
func (d *Dispatcher) claim(ctx context.Context) (*host.TaskRecord, error) {
	d.running.Add(1)
	now := time.Now()
	d.fireDueSchedules(ctx, now)
	d.expireMessages(ctx, now)
	t, err := d.cfg.Backend.Claim(ctx, d.cfg.RunnerID, now)
	if err != nil {
		d.running.Add(-1)
	} else {
		d.ran.Add(1)
	}
	return t, err
}

// idle appends dispatch_idle when the dispatcher has just become idle: a
// claim found nothing, no task is running or being claimed, and some ran
// since it was last idle. Polls of an idle queue append nothing.
func (d *Dispatcher) idle(ctx context.Context) {
	if ctx.Err() != nil || d.running.Load() != 0 {
		return
	}
	n := d.ran.Swap(0)
	if n == 0 {
		return
	}
	data, _ := json.Marshal(map[string]any{"runner_id": d.cfg.RunnerID, "tasks_run": n})
	if _, err := d.cfg.Backend.AppendEvent(ctx, host.Event{Type: host.EventDispatchIdle, Data: data}); err != nil {
		d.cfg.Log("recording dispatch_idle failed", "error", err)
	}
}

// RunTask runs one claimed task and settles it. If the store fails to
// settle it (a full disk, an I/O error), RunTask tries again until it
// succeeds or ctx is done.
func (d *Dispatcher) RunTask(ctx context.Context, t *host.TaskRecord) {
	d.runTask(ctx, ctx.Done(), t, nil)
}

// runTask is RunTask calling settling (if not nil) just before it settles
// the task. A settle the store fails is tried again until stop: a task
// left running would otherwise wait for the next boot sweep, however soon
// the store recovered. After stop it is left to that sweep, as after a
// crash.
func (d *Dispatcher) runTask(ctx context.Context, stop <-chan struct{}, t *host.TaskRecord, settling func()) {
	began := time.Now()
	stats := host.TaskStats{TaskID: t.TaskID, TaskType: t.TaskType, Attempt: t.AttemptCount, Outcome: "error", Status: t.Status}
	if t.StartedAt != nil && t.StartedAt.After(t.AvailableAt) {
		stats.Lag = t.StartedAt.Sub(t.AvailableAt)
	}
	d.cfg.Observer.TaskStarted(stats)
	// On a store with leases, the task's lease is renewed until it is
	// settled (or left to the sweep).
	release := d.hold(t)
	defer release()
	defer func() {
		stats.Duration = time.Since(began)
		d.cfg.Observer.TaskFinished(stats)
	}()
	settle := func(in host.FinishInput) error {
		release()
		if settling != nil {
			settling()
			settling = nil // the next task is claimed once, whatever the retries
		}
		return d.retry(stop, "settling task", t.TaskID, func() error {
			rec, err := d.cfg.Backend.Finish(ctx, t.TaskID, in)
			if err == nil {
				stats.Status = rec.Status
			}
			return err
		})
	}
	fail := func(class host.RetryClass, msg string) {
		status, machine := host.TaskPermanentFailure, host.MachineFailed
		if class == host.RetryRetryable {
			status, machine = host.TaskRetryableFailure, host.MachineNeedsRetry
		}
		err := settle(host.FinishInput{
			Claimed:    t,
			Outcome:    host.TaskOutcome{Status: status, MachineStatus: machine, OperatorSummary: msg},
			RetryClass: class, Error: msg,
		})
		if err != nil {
			d.cfg.Log("settling task failed", "task", t.TaskID, "error", err)
		}
	}
	reads := d.readsFor(ctx, t.TaskType)
	route, err := reads.route(ctx)
	if err != nil {
		// No route (or an ambiguous one) is permanent until an operator
		// acts; a store that failed to answer is worth another try.
		fail(classOf(err), fmt.Sprintf("task type %q: %v", t.TaskType, err))
		return
	}
	stats.Pack = route.Pack
	arch, err := d.cfg.Packs.Open(ctx, route.Pack)
	if err != nil {
		fail(host.RetryPermanent, fmt.Sprintf("task type %q: pack %s: %v", t.TaskType, route.Pack, err))
		return
	}
	l, err := d.load(ctx, arch, route.Node, runtime.Limits{})
	if err != nil {
		fail(host.RetryPermanent, fmt.Sprintf("task type %q: %v", t.TaskType, err))
		return
	}
	b, err := d.compile(ctx, t, reads)
	if err != nil {
		// A profile or agent missing is permanent until an operator acts.
		fail(classOf(err), fmt.Sprintf("task type %q: compile bundle: %v", t.TaskType, err))
		return
	}
	att, res, svc, err := d.run(ctx, l, route.Node, runtime.Invocation{
		Node: route.Node, Input: t.Payload, RunID: t.TaskID, NodeID: route.Node, TenantID: t.Tenant, Attempt: t.AttemptCount, Resume: t.ResumeValues,
	}, t.TaskID, b, false)
	if err != nil {
		fail(host.RetryRetryable, fmt.Sprintf("invoke %s: %v", route.Node, err))
		return
	}
	stats.Outcome = string(res.Outcome)
	in := host.FinishInput{Record: att, Claimed: t, RetryClass: att.RetryClass, Bundle: b.event(t.TaskID, att.AttemptID, t.AttemptCount)}
	unmet := ""
	if res.Outcome == abi.Completed {
		unmet = b.successFailure(svc, att.Output, res.TaskOutcome)
	}
	switch {
	case unmet != "":
		// The node completed, but not as the task type's success_policy
		// asks: the attempt stands as recorded, the task fails.
		in.Outcome = host.TaskOutcome{Status: host.TaskPermanentFailure, MachineStatus: host.MachineFailed, OperatorSummary: unmet, RawOutput: string(att.Output)}
		in.RetryClass, in.Error = host.RetryPermanent, unmet
	case res.Outcome == abi.Completed:
		evs, err := reportedEvents(l, route.Node, att.Output, svc)
		var msgs []host.MessageInput
		if err == nil {
			msgs, err = svc.publishedMessages(ctx, res.TaskOutcome)
		}
		if err != nil {
			msg := "invalid_output: " + err.Error()
			in.Outcome = host.TaskOutcome{Status: host.TaskPermanentFailure, MachineStatus: host.MachineFailed, OperatorSummary: msg}
			in.RetryClass, in.Error = host.RetryPermanent, msg
			break
		}
		in.Outcome = host.TaskOutcome{Status: host.TaskCompleted, MachineStatus: host.MachineOK, OperatorSummary: "completed",
			RawOutput: string(att.Output), ArtifactPaths: svc.artifacts}
		in.FollowUps, in.SensorEvents, in.Messages = svc.staged, evs, msgs
		svc.applyTaskOutcome(&in, res.TaskOutcome)
		if n := len(in.FollowUps); n > 0 && in.FollowUpsRefused == "" && d.cfg.CheckFollowUps != nil {
			if err := d.cfg.CheckFollowUps(ctx, t.Tenant, n); err != nil {
				in.FollowUpsRefused = "follow-up tasks: " + err.Error()
			}
		}
	case res.Outcome == abi.Suspended:
		in.Outcome = host.TaskOutcome{Status: host.TaskBlocked, MachineStatus: host.MachineBlocked, OperatorSummary: "suspended: " + string(att.Interrupt)}
	default:
		msg := "failed"
		if att.Error != nil {
			msg = att.Error.Code + ": " + att.Error.Message
		}
		status, machine := host.TaskPermanentFailure, host.MachineFailed
		if att.RetryClass == host.RetryRetryable {
			status, machine = host.TaskRetryableFailure, host.MachineNeedsRetry
		}
		in.Outcome = host.TaskOutcome{Status: status, MachineStatus: machine, OperatorSummary: strings.TrimSpace(msg)}
		in.Error = msg
	}
	if err := settle(in); err != nil {
		if errors.Is(err, host.ErrConflict) {
			d.cfg.Log("settlement refused; the attempt is kept as evidence", "task", t.TaskID, "attempt", t.AttemptCount, "error", err)
		} else {
			d.cfg.Log("settling task failed", "task", t.TaskID, "error", err)
		}
		// The task could not be settled (cancelled, reclaimed, a stale
		// runner...): the attempt still ran, so its evidence is kept.
		if rerr := d.retry(stop, "recording attempt", t.TaskID, func() error { return d.cfg.Backend.RecordAttempt(ctx, att) }); rerr != nil {
			d.cfg.Log("recording attempt failed", "task", t.TaskID, "attempt", att.AttemptID, "error", rerr)
		}
	}
}

// classOf is the retry class of a failure to prepare a task: retryable
// when the store failed to answer, else permanent.
func classOf(err error) host.RetryClass {
	if host.Retryable(err) {
		return host.RetryRetryable
	}
	return host.RetryPermanent
}

// retry calls fn until it returns nil or an answer rather than a failure
// of the store (see host.Retryable), waiting longer after each failure (up
// to 5 s), or until stop; it returns fn's last error.
func (d *Dispatcher) retry(stop <-chan struct{}, what, taskID string, fn func() error) error {
	wait := d.retryWait
	var task []any
	if taskID != "" {
		task = []any{"task", taskID}
	}
	for n := 1; ; n++ {
		err := fn()
		if !host.Retryable(err) {
			if n > 1 {
				d.cfg.Log(what+": store recovered", append(task, "tries", n, "error", err)...)
			}
			return err
		}
		if n == 1 {
			d.cfg.Log(what+" failed; trying again until the store recovers", append(task, "error", err)...)
		}
		select {
		case <-stop:
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// Close releases the modules the dispatcher loaded.
func (d *Dispatcher) Close(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, l := range d.modules {
		l.mod.Close(ctx)
		delete(d.modules, k)
	}
}
