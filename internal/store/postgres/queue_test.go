package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Claim takes the lowest priority number first, then the earliest
// available_at, then the order of enqueueing; a task not yet available
// is not taken.
func TestClaimOrder(t *testing.T) {
	clk := newClock()
	s := nodes(t, 1, clk)[0]
	later := intent("later", 1)
	later.AvailableAt = clk.Now().Add(time.Hour).Format(time.RFC3339)
	mustEnqueue(t, s, later)
	a := mustEnqueue(t, s, intent("a", 5))
	b := mustEnqueue(t, s, intent("b", 2))
	c := mustEnqueue(t, s, intent("c", 5))
	delayed := intent("d", 2)
	delayed.Schedule = &host.Schedule{DelayMinutes: 1}
	d := mustEnqueue(t, s, delayed)
	clk.Add(2 * time.Minute)
	for _, want := range []*host.TaskRecord{b, d, a, c} {
		got := mustClaim(t, s, "r1")
		if got.TaskID != want.TaskID || got.Status != host.TaskRunning || got.AttemptCount != 1 || got.RunnerID != "r1" {
			t.Fatalf("claimed %s (%s), want %s", got.TaskType, got.Status, want.TaskType)
		}
	}
	_, err := s.Claim(ctx, "r1", time.Time{})
	wantErr(t, err, host.ErrEmpty)
	if got, err := s.Claim(ctx, "r1", clk.Now().Add(2*time.Hour)); err != nil || got.TaskType != "later" {
		t.Fatalf("the later task at its time: %v %v", got, err)
	}
}

// Several nodes, several goroutines each, claim and settle one queue at
// once: every task is claimed exactly once and completes exactly once,
// and the chain they appended together verifies.
func TestClaimSkipLockedConcurrent(t *testing.T) {
	const tasks, perNode = 300, 4
	ns := nodes(t, 3, nil)
	for range tasks {
		mustEnqueue(t, ns[0], intent("work", 5))
	}
	var mu sync.Mutex
	claims := map[string]int{}
	byRunner := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, len(ns)*perNode)
	for i, s := range ns {
		for j := range perNode {
			runner := fmt.Sprintf("node%d-w%d", i, j)
			wg.Go(func() {
				for {
					task, err := s.Claim(ctx, runner, time.Time{})
					if err != nil {
						if !errorsIs(err, host.ErrEmpty) {
							errs <- err
						}
						return
					}
					mu.Lock()
					claims[task.TaskID]++
					byRunner[runner]++
					mu.Unlock()
					if _, err := s.Finish(ctx, task.TaskID, okFinish(task)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(claims) != tasks {
		t.Fatalf("%d tasks claimed, want %d", len(claims), tasks)
	}
	for id, n := range claims {
		if n != 1 {
			t.Fatalf("task %s claimed %d times", id, n)
		}
	}
	counts, err := ns[1].CountTasks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counts[host.TaskCompleted] != tasks || len(counts) != 1 {
		t.Fatalf("counts %v", counts)
	}
	finished := events(t, ns[2], host.EventFilter{Type: host.EventTaskFinished})
	if len(finished) != tasks {
		t.Fatalf("%d task_finished events, want %d", len(finished), tasks)
	}
	rep := verify(t, ns[2])
	if rep.Attempts != tasks {
		t.Fatalf("chain holds %d attempts, want %d", rep.Attempts, tasks)
	}
	t.Logf("claims per runner: %v", byRunner)
}

// A node paused past its lease: another node reclaims the task and runs
// it again; the paused node's late settle is refused (its attempt still
// recorded, with task_settle_refused), and the task completes once.
func TestFenceStaleRunner(t *testing.T) {
	clk := newClock()
	ns := nodes(t, 2, clk)
	a, b := ns[0], ns[1]
	task := mustEnqueue(t, a, intent("work", 5))
	first := mustClaim(t, a, "node-a")
	if first.TaskID != task.TaskID {
		t.Fatal("claimed another task")
	}
	// Within the lease nothing is reclaimed.
	clk.Add(9 * time.Second)
	if n, err := b.ReclaimExpired(ctx, time.Time{}); err != nil || n != 0 {
		t.Fatalf("reclaimed %d within the lease (%v)", n, err)
	}
	// node-a pauses; its lease expires and node-b reclaims and claims.
	clk.Add(2 * time.Second)
	if n, err := b.ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d past the lease (%v)", n, err)
	}
	second := mustClaim(t, b, "node-b")
	if second.TaskID != task.TaskID || second.AttemptCount != 2 {
		t.Fatalf("node-b claimed %s attempt %d", second.TaskID, second.AttemptCount)
	}
	// node-a wakes up: its heartbeat and its settle are refused.
	if _, err := a.Heartbeat(ctx, task.TaskID, "node-a", 1); err == nil {
		t.Fatal("a reclaimed lease was extended")
	}
	late := okFinish(first)
	_, err := a.Finish(ctx, task.TaskID, late)
	wantErr(t, err, host.ErrConflict)
	if got, err := a.Attempt(ctx, late.Record.AttemptID); err != nil || got.RunnerID != "node-a" || got.Attempt != 1 {
		t.Fatalf("the refused attempt is not recorded: %+v %v", got, err)
	}
	refused := events(t, b, host.EventFilter{TaskID: task.TaskID, Type: EventTaskSettleRefused})
	if len(refused) != 1 || refused[0].AttemptID != late.Record.AttemptID {
		t.Fatalf("task_settle_refused events: %+v", refused)
	}
	if got, _ := b.Task(ctx, task.TaskID); got.Status != host.TaskRunning || got.RunnerID != "node-b" {
		t.Fatalf("the refused settle changed the task: %+v", got)
	}
	// A claim without an attempt (the node never started) is fenced too.
	_, err = a.Finish(ctx, task.TaskID, host.FinishInput{Claimed: first, Outcome: host.TaskOutcome{MachineStatus: host.MachineFailed}})
	wantErr(t, err, host.ErrConflict)
	done, err := b.Finish(ctx, task.TaskID, okFinish(second))
	if err != nil || done.Status != host.TaskCompleted {
		t.Fatalf("node-b's settle: %+v %v", done, err)
	}
	// After completion, node-a's settle is refused again; the task
	// completed once.
	late2 := okFinish(first)
	_, err = a.Finish(ctx, task.TaskID, late2)
	wantErr(t, err, host.ErrConflict)
	finished := events(t, a, host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskFinished})
	if len(finished) != 1 {
		t.Fatalf("%d task_finished events", len(finished))
	}
	rep := verify(t, a)
	if rep.Attempts != 3 {
		t.Fatalf("%d attempts in the chain, want 3 (two refused, one settled)", rep.Attempts)
	}
}

// A runner on the same attempt number but not the holder (its runner id
// differs) is refused: the fence names the runner too.
func TestFenceRunner(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	mustEnqueue(t, s, intent("work", 5))
	task := mustClaim(t, s, "holder")
	in := okFinish(task)
	in.Record.RunnerID, in.Claimed = "impostor", nil
	_, err := s.Finish(ctx, task.TaskID, in)
	wantErr(t, err, host.ErrConflict)
	if got, _ := s.Task(ctx, task.TaskID); got.Status != host.TaskRunning {
		t.Fatal(got.Status)
	}
	if _, err := s.Finish(ctx, task.TaskID, okFinish(task)); err != nil {
		t.Fatal(err)
	}
}

// A runner that comes back under the same id (a restarted node) and
// claims the task again is fenced by the attempt number: its old
// attempt's settle is refused.
func TestFenceAttempt(t *testing.T) {
	clk := newClock()
	s := nodes(t, 1, clk)[0]
	mustEnqueue(t, s, intent("work", 5))
	old := mustClaim(t, s, "r")
	clk.Add(11 * time.Second)
	if n, err := s.ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d (%v)", n, err)
	}
	cur := mustClaim(t, s, "r")
	_, err := s.Finish(ctx, old.TaskID, okFinish(old))
	wantErr(t, err, host.ErrConflict)
	if !contains(err.Error(), "is attempt 1 but the task is on attempt 2") {
		t.Fatal(err)
	}
	if got, err := s.Finish(ctx, cur.TaskID, okFinish(cur)); err != nil || got.Status != host.TaskCompleted {
		t.Fatalf("%+v %v", got, err)
	}
}

// Heartbeats keep a lease; without them it expires and any node
// reclaims the task (retryable, or permanent with no attempts left).
func TestLeaseHeartbeatAndExpiry(t *testing.T) {
	clk := newClock()
	ns := nodes(t, 2, clk)
	in := intent("work", 5)
	rec, err := ns[0].Enqueue(ctx, in, host.EnqueueOptions{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	task := mustClaim(t, ns[0], "r1")
	for range 3 {
		clk.Add(8 * time.Second)
		exp, err := ns[0].Heartbeat(ctx, task.TaskID, "r1", 1)
		if err != nil || !exp.Equal(clk.Now().Add(10*time.Second)) {
			t.Fatalf("heartbeat: %v %v", exp, err)
		}
		if n, err := ns[1].ReclaimExpired(ctx, time.Time{}); err != nil || n != 0 {
			t.Fatalf("a heartbeating lease was reclaimed (%d, %v)", n, err)
		}
	}
	_, err = ns[0].Heartbeat(ctx, task.TaskID, "r2", 1)
	wantErr(t, err, host.ErrConflict)
	clk.Add(11 * time.Second)
	if n, err := ns[1].ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d (%v)", n, err)
	}
	got, _ := ns[1].Task(ctx, rec.TaskID)
	if got.Status != host.TaskRetryableFailure || !got.AvailableAt.Equal(clk.Now()) {
		t.Fatalf("after reclaim: %s available %v", got.Status, got.AvailableAt)
	}
	ev := events(t, ns[1], host.EventFilter{TaskID: rec.TaskID, Type: host.EventBootSweepReclaimed})
	if len(ev) != 1 || !contains(string(ev[0].Data), `"reason":"lease_expired"`) {
		t.Fatalf("boot_sweep_reclaimed: %+v", ev)
	}
	// The second and last attempt expires too: permanent failure.
	mustClaim(t, ns[1], "r2")
	clk.Add(11 * time.Second)
	if n, err := ns[0].ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d (%v)", n, err)
	}
	if got, _ := ns[0].Task(ctx, rec.TaskID); got.Status != host.TaskPermanentFailure || got.FinishedAt == nil {
		t.Fatalf("after the last attempt: %+v", got)
	}
	verify(t, ns[0])
}

// Finish applies follow-ups and outbox messages in the settling
// transaction, only when the task completes; a retryable failure comes
// back after the backoff.
func TestFinishFollowUpsAndRetry(t *testing.T) {
	clk := newClock()
	s := nodes(t, 1, clk)[0]
	parent := mustEnqueue(t, s, intent("parent", 5))
	task := mustClaim(t, s, "r")
	in := okFinish(task)
	in.FollowUps = []host.TaskIntent{intent("child", 3)}
	in.Outcome.ExternalMessage = append(in.Outcome.ExternalMessage, []byte(`{"to":"ops","text":"hi"}`))
	done, err := s.Finish(ctx, parent.TaskID, in)
	if err != nil || done.Status != host.TaskCompleted {
		t.Fatalf("%+v %v", done, err)
	}
	kids, err := s.ListTasks(ctx, host.TaskFilter{TaskType: "child"})
	if err != nil || len(kids) != 1 || kids[0].ParentTaskID != parent.TaskID || kids[0].Source != "task:"+parent.TaskID {
		t.Fatalf("follow-ups: %+v %v", kids, err)
	}
	out, err := s.Outbox(ctx, parent.TaskID)
	if err != nil || len(out) != 1 || out[0].Status != host.OutboxPending {
		t.Fatalf("outbox: %+v %v", out, err)
	}
	stored, err := s.Task(ctx, parent.TaskID)
	if err != nil || stored.Status != done.Status || !stored.FinishedAt.Equal(*done.FinishedAt) || stored.Outcome.Status != host.TaskCompleted {
		t.Fatalf("stored %+v, returned %+v (%v)", stored, done, err)
	}
	child := mustClaim(t, s, "r")
	retry := okFinish(child)
	retry.Outcome.MachineStatus = host.MachineNeedsRetry
	got, err := s.Finish(ctx, child.TaskID, retry)
	if err != nil || got.Status != host.TaskRetryableFailure || !got.AvailableAt.Equal(clk.Now().Add(30*time.Second)) {
		t.Fatalf("retry: %+v %v", got, err)
	}
	_, err = s.Claim(ctx, "r", time.Time{})
	wantErr(t, err, host.ErrEmpty)
	clk.Add(31 * time.Second)
	if again := mustClaim(t, s, "r"); again.TaskID != child.TaskID || again.AttemptCount != 2 {
		t.Fatalf("claimed again: %+v", again)
	}
	verify(t, s)
}

// Cancel, Retry and Resume, with their errors.
func TestControls(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	pending := mustEnqueue(t, s, intent("a", 5))
	got, err := s.Cancel(ctx, pending.TaskID)
	if err != nil || got.Status != host.TaskOperatorCanceled {
		t.Fatalf("%+v %v", got, err)
	}
	_, err = s.Cancel(ctx, pending.TaskID)
	wantErr(t, err, host.ErrConflict)
	_, err = s.Cancel(ctx, "task-nope")
	wantErr(t, err, host.ErrNotFound)
	mustEnqueue(t, s, intent("b", 5))
	running := mustClaim(t, s, "r")
	if got, err := s.Cancel(ctx, running.TaskID); err != nil || !got.CancelRequested || got.Status != host.TaskRunning {
		t.Fatalf("%+v %v", got, err)
	}
	if got, err := s.Finish(ctx, running.TaskID, okFinish(running)); err != nil || got.Status != host.TaskOperatorCanceled {
		t.Fatalf("%+v %v", got, err)
	}
	mustEnqueue(t, s, intent("c", 5))
	blocked := mustClaim(t, s, "r")
	in := okFinish(blocked)
	in.Outcome.MachineStatus = host.MachineBlocked
	if got, err := s.Finish(ctx, blocked.TaskID, in); err != nil || got.Status != host.TaskBlocked {
		t.Fatalf("%+v %v", got, err)
	}
	_, err = s.Resume(ctx, blocked.TaskID, []byte(`1`), "op")
	wantErr(t, err, host.ErrConflict) // its attempt completed, it did not suspend
	if got, err := s.Retry(ctx, blocked.TaskID, "op"); err != nil || got.Status != host.TaskPending {
		t.Fatalf("%+v %v", got, err)
	}
	_, err = s.Retry(ctx, blocked.TaskID, "op")
	wantErr(t, err, host.ErrConflict)
	verify(t, s)
}

// Enqueue validates as internal/store/sqlite does: errors name the field.
func TestEnqueueValidation(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	_, err := s.Enqueue(ctx, host.TaskIntent{Source: "x", Payload: []byte(`{}`)}, host.EnqueueOptions{})
	wantErr(t, err, host.ErrValidation)
	var he *host.Error
	if !errorsAs(err, &he) || he.Field != "task_type" {
		t.Fatalf("%v", err)
	}
	_, err = s.Enqueue(ctx, intent("a", 5), host.EnqueueOptions{MaxAttempts: -1})
	wantErr(t, err, host.ErrValidation)
	in := intent("a", 5)
	in.WorkflowRef = &host.WorkflowRef{WorkflowID: "w", StateID: "s", InstanceKey: "k"}
	_, err = s.Enqueue(ctx, in, host.EnqueueOptions{})
	if !errorsAs(err, &he) || he.Field != "workflow_ref.workflow_id" {
		t.Fatalf("a workflow_ref naming no record: %v", err)
	}
}

// A settle refused because the lease was reclaimed (nobody claimed the
// task again yet) keeps its attempt; a settle repeated after the task was
// settled by the same claim records nothing, as on internal/store/sqlite.
func TestFenceRecordsOnlyDisplacedAttempts(t *testing.T) {
	clk := newClock()
	s := nodes(t, 1, clk)[0]
	mustEnqueue(t, s, intent("reclaimed", 5))
	held := mustClaim(t, s, "r")
	clk.Add(11 * time.Second)
	if n, err := s.ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d (%v)", n, err)
	}
	late := okFinish(held)
	_, err := s.Finish(ctx, held.TaskID, late)
	wantErr(t, err, host.ErrConflict)
	if _, err := s.Attempt(ctx, late.Record.AttemptID); err != nil {
		t.Fatalf("the reclaimed claim's attempt is not recorded: %v", err)
	}
	mustEnqueue(t, s, intent("settled", 5))
	task := mustClaim(t, s, "r")
	if _, err := s.Finish(ctx, task.TaskID, okFinish(task)); err != nil {
		t.Fatal(err)
	}
	again := okFinish(task)
	_, err = s.Finish(ctx, task.TaskID, again)
	wantErr(t, err, host.ErrConflict)
	_, err = s.Attempt(ctx, again.Record.AttemptID)
	wantErr(t, err, host.ErrNotFound)
	if n := len(events(t, s, host.EventFilter{Type: EventTaskSettleRefused})); n != 1 {
		t.Fatalf("%d task_settle_refused events, want 1", n)
	}
	verify(t, s)
}
