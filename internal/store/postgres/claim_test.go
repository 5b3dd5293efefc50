package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// The claims a writer's batch carries are answered together: one
// runner's claims within claimWindow of one another by one statement, as
// of the latest of their times, the tasks going in queue order to the
// claims in the order of their times. A claim given up before the batch
// ran is not claimed for; a claim of another runner, or one too far
// apart, claims for itself.
func TestClaimsOfABatchAnsweredTogether(t *testing.T) {
	clk := newClock()
	s := nodes(t, 1, clk)[0]
	var byPrio [6]*host.TaskRecord
	for _, p := range []int{5, 4, 3, 2, 1} {
		byPrio[p] = mustEnqueue(t, s, intent("t", p))
	}
	now := clk.Now()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	type claim struct {
		runner string
		at     time.Duration
		ctx    context.Context
	}
	claims := []claim{
		{"a", 2 * time.Millisecond, ctx}, // together: 2nd
		{"a", 0, ctx},                    // together: 1st
		{"b", 0, ctx},                    // another runner: alone, 4th
		{"a", time.Millisecond, gone},    // given up: not claimed for
		{"a", 3 * time.Millisecond, ctx}, // together: 3rd
		{"a", 3 * time.Second, ctx},      // too late for the others: alone, 5th
	}
	ops := make([]*op, len(claims))
	got := make([]func() *host.TaskRecord, len(claims))
	for i, c := range claims {
		ops[i], got[i] = s.claimOp(c.ctx, c.runner, now.Add(c.at))
	}
	tk, errs, err := s.w.batch(ops)
	if err != nil {
		t.Fatal(err)
	}
	tk.await(ctx)
	want := []int{2, 1, 4, 0, 3, 5}
	for i, p := range want {
		if p == 0 {
			if errs[i] == nil || got[i]() != nil {
				t.Fatalf("claim %d was given up and still got %v (%v)", i, got[i](), errs[i])
			}
			continue
		}
		task := got[i]()
		if errs[i] != nil || task == nil || task.TaskID != byPrio[p].TaskID {
			t.Fatalf("claim %d got %v (%v), want the task of priority %d", i, task, errs[i], p)
		}
		if task.Status != host.TaskRunning || task.RunnerID != claims[i].runner {
			t.Fatalf("claim %d: task %s by %q", i, task.Status, task.RunnerID)
		}
	}
	// Claimed together, as of the latest of their times; the others as
	// of their own.
	for i, at := range []time.Duration{3 * time.Millisecond, 3 * time.Millisecond, 0, 0, 3 * time.Millisecond, 3 * time.Second} {
		if want[i] == 0 {
			continue
		}
		if st := got[i]().StartedAt; st == nil || !st.Equal(now.Add(at)) {
			t.Fatalf("claim %d started at %v, want %v", i, st, now.Add(at))
		}
	}
	claimed := events(t, s, host.EventFilter{Type: host.EventTaskClaimed})
	if len(claimed) != 5 {
		t.Fatalf("%d task_claimed events, want one a claim answered", len(claimed))
	}
	if _, err := s.Claim(ctx, "a", time.Time{}); !errorsIs(err, host.ErrEmpty) {
		t.Fatalf("a sixth claim: %v, want the queue empty", err)
	}
	verify(t, s)
}

// A batch whose transaction fails drops what its claims were given: run
// again, each claims anew.
func TestClaimsOfAFailedBatchClaimAnew(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	task := mustEnqueue(t, s, intent("t", 1))
	a, gotA := s.claimOp(ctx, "a", time.Now())
	b, gotB := s.claimOp(ctx, "a", time.Now())
	var pid int
	breaks := &op{ctx: ctx, fn: func(x *tx) error {
		// The connection is lost: the whole transaction with it.
		if err := x.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
		_, err := x.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		return err
	}}
	if _, _, err := s.w.batch([]*op{a, breaks, b}); err == nil {
		t.Fatal("a batch whose connection was lost committed")
	}
	// Its rows stay locked until the backend has gone.
	for deadline := time.Now().Add(20 * time.Second); ; {
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated backend never went")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if a.claim.ready || b.claim.ready || a.claim.task != nil || b.claim.task != nil {
		t.Fatal("the claims kept a task of a transaction that did not commit")
	}
	a.done, b.done = make(chan error, 1), make(chan error, 1)
	s.w.runBatch([]*op{a, b})
	errA, errB := <-a.done, <-b.done
	if errA != nil || gotA() == nil || gotA().TaskID != task.TaskID {
		t.Fatalf("run alone, the first claim got %v (%v)", gotA(), errA)
	}
	if !errorsIs(errB, host.ErrEmpty) || gotB() != nil {
		t.Fatalf("run alone, the second claim got %v (%v), want the queue empty", gotB(), errB)
	}
}

// A task's setup is read again when the configuration changed on any
// node before the task's claim: the claim returns the version, which
// every write to the setup's tables bumps. Each caller gets records of
// its own.
func TestTaskSetupAsOfTheClaim(t *testing.T) {
	ns := nodes(t, 2, nil)
	a, b := ns[0], ns[1]
	route := func(pack string) host.TaskTypeRoute {
		return host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "t"}, Pack: pack, Node: "n"}
	}
	if err := b.SetPackTaskTypes(ctx, "local.a", []host.TaskTypeRoute{route("local.a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}); err != nil {
		t.Fatal(err)
	}
	setup := func(want string) *host.TaskSetup {
		t.Helper()
		got, err := a.TaskSetup(ctx, "t")
		if err != nil || got.RouteErr != nil || got.Route.Pack != want || len(got.Agents) != 1 {
			t.Fatalf("node a's setup: %+v (%v), want the route of %s and one agent", got, err, want)
		}
		return got
	}
	first := setup("local.a")
	first.Agents[0].Agent.DisplayName = "changed by a caller"
	first.Agents = append(first.Agents, host.AgentRecord{})
	if got := setup("local.a"); got.Agents[0].Agent.DisplayName != "Arc" {
		t.Fatalf("a caller's change reached the next caller: %+v", got.Agents)
	}
	for i, pack := range []string{"local.b", "local.c"} {
		if err := b.SetTaskTypeOverride(ctx, route(pack)); err != nil {
			t.Fatal(err)
		}
		// Node b's change is seen by node a at its next claim, alone
		// (i = 0) or answered with other claims (i = 1).
		mustEnqueue(t, b, intent("t", 0))
		if i == 0 {
			mustClaim(t, a, "r")
		} else {
			o1, got1 := a.claimOp(ctx, "r", time.Now())
			o2, _ := a.claimOp(ctx, "r", time.Now())
			tk, errs, err := a.w.batch([]*op{o1, o2})
			if err != nil || errs[0] != nil || got1() == nil {
				t.Fatalf("claims answered together: %v %v", errs, err)
			}
			tk.await(ctx)
		}
		setup(pack)
	}
}

// An operation of a batch whose first statement PostgreSQL refuses to
// prepare (so that not even its savepoint was set) must not undo the
// operation before it: rolling back to its own savepoint fails, and the
// batch with it, rather than roll back to the savepoint of the one
// before, which would then report a claim the database does not hold.
func TestBatchNeverUndoesAnotherOperation(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	task := mustEnqueue(t, s, intent("t", 1))
	a, got := s.claimOp(ctx, "a", time.Now())
	bad := &op{ctx: ctx, fn: func(x *tx) error {
		_, err := x.Exec(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return err
	}}
	tk, errs, err := s.w.batch([]*op{a, bad})
	if err == nil {
		tk.await(ctx)
		stored, lerr := s.Task(ctx, task.TaskID)
		if lerr != nil {
			t.Fatal(lerr)
		}
		if errs[0] == nil && got() != nil && stored.Status != host.TaskRunning {
			t.Fatalf("the claim reported task %s claimed, the database holds it %s", got().TaskID, stored.Status)
		}
	}
}
