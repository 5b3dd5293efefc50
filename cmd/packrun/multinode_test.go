package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/pgtest"
	"github.com/packrun/packrun/internal/testing/runstest"
)

// settleRefused is the event the PostgreSQL store appends when it refuses
// a settlement from a runner that no longer holds the task
// (internal/store/postgres.EventTaskSettleRefused).
const settleRefused = "task_settle_refused"

// cluster is a PostgreSQL database with packs installed, and the homes
// of the `packrun serve` nodes working on it.
type cluster struct {
	t     *testing.T
	bin   string
	dsn   string
	admin homeCLI // where the packs were signed and installed from
	store host.Backend
	nodes map[string]*node
}

// node is one `packrun serve` node: its own home (the admin home's
// trust.json and secret.key copied in, its own host.key), restarted under
// a new runner id "<name>-<n>" each time.
type node struct {
	name, home string
	runs       int
	cur        served
	runner     string
}

// newCluster installs the C hello pack (task type hello.c) and a pack
// whose node sleeps until its 5 s time limit (task type multinode.slow)
// into a fresh PostgreSQL database, through the CLI with --store.
func newCluster(t *testing.T, names ...string) *cluster {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	bin := packrunBinary(t)
	c := &cluster{t: t, bin: bin, dsn: dsn, admin: homeCLI{t, filepath.Join(dir, "admin")}, nodes: map[string]*node{}}
	installHelloC(func(args ...string) { c.cli(args...) }, dir)
	key := filepath.Join(dir, "slow")
	c.cli("keys", "generate", "--out", key)
	c.cli("trust", "add-key", "slow", key+".pub", "--namespace", "local.hostile.*")
	c.cli("install", hostilePack(t, c.admin, dir, key, "sleep_past_deadline", `{"timeoutMs":5000}`))
	c.cli("task-types", "set", "multinode.slow", "--pack", "local.hostile.sleep-past-deadline", "--node", "hostile.sleep-past-deadline")
	h, err := packrun.Open(context.Background(), c.admin.home, packrun.Config{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	c.store = h.Store()
	for _, name := range names {
		n := &node{name: name, home: filepath.Join(dir, name)}
		if err := os.MkdirAll(n.home, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"trust.json", "secret.key"} {
			b, err := os.ReadFile(filepath.Join(c.admin.home, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(n.home, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		c.nodes[name] = n
	}
	return c
}

// cli runs packrun on the admin home and the cluster's store.
func (c *cluster) cli(args ...string) string {
	c.t.Helper()
	return c.admin.ok(append([]string{"--store", c.dsn}, args...)...)
}

// start starts n's serve process under its next runner id.
func (c *cluster) start(n *node) {
	c.t.Helper()
	n.runs++
	n.runner = fmt.Sprintf("%s-%d", n.name, n.runs)
	n.cur = startServeWith(c.t, c.bin, n.home, "--store", c.dsn, "--lease", "2s", "--insecure-no-auth", "--runner-id", n.runner, "--log-level", "info")
	p := n.cur.Process
	c.t.Cleanup(func() {
		p.Signal(syscall.SIGCONT)
		p.Kill()
	})
	n.cur.waitUp(c.t)
}

// kill kills n with SIGKILL, waits for it and starts it again.
func (c *cluster) kill(n *node) {
	c.t.Helper()
	if err := n.cur.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	n.cur.Wait()
	c.start(n)
}

// nodeOf returns the node whose current process claims as runner.
func (c *cluster) nodeOf(runner string) *node {
	for _, n := range c.nodes {
		if n.runner == runner {
			return n
		}
	}
	c.t.Fatalf("no node runs as %q", runner)
	return nil
}

// await polls cond until it holds, failing the test after a generous
// deadline (a hang guard, not a measure).
func (c *cluster) await(what string, cond func() bool) {
	c.t.Helper()
	const limit = 30 * time.Second
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %s for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// completed is how many tasks are completed.
func (c *cluster) completed() int {
	c.t.Helper()
	n, err := c.store.CountTasks(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	return n[host.TaskCompleted]
}

// events returns every event of type typ (of task, if not ""), oldest first.
func (c *cluster) events(typ, task string) []*host.Event {
	c.t.Helper()
	var out []*host.Event
	var after int64
	for {
		page, err := c.store.Events(context.Background(), host.EventFilter{Type: typ, TaskID: task, AfterSeq: after, Limit: 1000})
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		after = page[len(page)-1].Seq
	}
}

// attempts returns every attempt of tasks of type typ.
func (c *cluster) attempts(typ string) []*host.Attempt {
	c.t.Helper()
	var out []*host.Attempt
	var before int64
	for {
		page, err := c.store.ListAttempts(context.Background(), host.AttemptFilter{TaskType: typ, BeforeSeq: before, Limit: 1000})
		if err != nil {
			c.t.Fatal(err)
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out
		}
		before = page[len(page)-1].EventSeq
	}
}

// TestThreeNodesOnePostgres is issue 18's multi-node test: three `packrun
// serve` processes on one PostgreSQL database (each its own home with the
// same trust.json and secret.key, --lease 2s) work through 2,000 C hello
// tasks. Once each has completed some:
//
//   - one node is stopped with SIGSTOP while it runs a slow task (one that
//     sleeps until its 5 s time limit), and continued only once another
//     node has reclaimed that task (its lease expired): its late
//     settlement is refused, and its attempt kept as evidence;
//   - meanwhile another node is killed with SIGKILL twice (after the
//     others made progress each time), and restarted each time;
//   - then a second slow task runs past the lease on a live node, renewed
//     by heartbeats: it is not reclaimed, and its node settles it.
//
// Every hello task ends completed, settled exactly once (one task_finished,
// one accepted completed attempt); `packrun evidence verify` passes; each
// node completed a share. Every wait is for a state of the store, with a
// generous deadline as a hang guard only.
func TestThreeNodesOnePostgres(t *testing.T) {
	const total = 2000
	names := []string{"node-a", "node-b", "node-c"}
	c := newCluster(t, names...)
	ctx := context.Background()
	ids := make([]string, total)
	for i := range ids {
		rec, err := c.store.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "test", Payload: json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i))}, host.EnqueueOptions{MaxAttempts: 20})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = rec.TaskID
	}
	began := time.Now()
	for _, name := range names {
		c.start(c.nodes[name])
	}
	c.await("each node to complete a task", func() bool {
		done := map[string]bool{}
		for _, a := range c.recentAttempts() {
			done[a.RunnerID] = true
		}
		return done["node-a-1"] && done["node-b-1"] && done["node-c-1"]
	})

	// Pause the node that claims a slow task (the most urgent: some node
	// claims it next).
	slow := c.enqueueSlow()
	first := c.awaitRunning(slow, 1)
	paused := c.nodeOf(first.RunnerID)
	pausedRunner := paused.runner
	if err := paused.cur.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	// Meanwhile another node is killed twice, and started again.
	var victim *node
	for _, name := range names {
		if n := c.nodes[name]; n != paused && victim == nil {
			victim = n
		}
	}
	var atKill []int
	for range 2 {
		done := c.completed()
		c.await("progress before a kill", func() bool { return c.completed() >= min(done+100, total) })
		atKill = append(atKill, c.completed())
		c.kill(victim)
	}
	// A node reclaims the slow task once its lease expired (nothing renews
	// it); then the paused node is continued, and its settlement refused.
	c.await("the slow task's lease to be reclaimed", func() bool {
		return len(c.events(host.EventBootSweepReclaimed, slow.TaskID)) > 0
	})
	pausedFor := time.Since(stoppedAt)
	if err := paused.cur.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.await("the paused node's late settlement of the slow task", func() bool {
		return len(c.events(settleRefused, slow.TaskID)) > 0
	})
	if evs := c.events(host.EventBootSweepReclaimed, slow.TaskID); len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"runner_id":"`+pausedRunner+`"`) || !strings.Contains(string(evs[0].Data), `"reason":"lease_expired"`) {
		t.Errorf("the slow task was reclaimed %d times (want once, from %s): %v", len(evs), pausedRunner, evs)
	}
	refused := c.events(settleRefused, slow.TaskID)
	if len(refused) != 1 || !strings.Contains(string(refused[0].Data), `"runner_id":"`+pausedRunner+`"`) || refused[0].AttemptID == "" {
		t.Fatalf("the paused node's settlement: %v", refused)
	}
	att, err := c.store.Attempt(ctx, refused[0].AttemptID)
	if err != nil || att.RunnerID != pausedRunner || att.Attempt != 1 {
		t.Fatalf("the paused node's attempt as evidence: %+v %v", att, err)
	}

	// A slow task on a live node keeps its lease past the TTL.
	slow2 := c.enqueueSlow()
	holder := c.awaitRunning(slow2, 1).RunnerID
	c.await("the second slow task to end", func() bool {
		rec, err := c.store.Task(ctx, slow2.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Status.Terminal()
	})
	// Its events are listed once a link pass placed them, just after
	// the status they record is visible.
	c.await("the second slow task's task_finished event", func() bool {
		return len(c.events(host.EventTaskFinished, slow2.TaskID)) > 0
	})
	if evs := c.events(host.EventBootSweepReclaimed, slow2.TaskID); len(evs) != 0 {
		t.Errorf("a slow task on a live node was reclaimed: %v", evs)
	}
	if evs := c.events(host.EventTaskFinished, slow2.TaskID); len(evs) != 1 || len(c.events(settleRefused, slow2.TaskID)) != 0 {
		t.Errorf("the second slow task was not settled by %s: %v", holder, evs)
	}

	c.await("every task to end", func() bool { return c.completed() >= total })
	took := c.checkSettledOnce(ids, names).Sub(began)
	if out := c.cli("evidence", "verify"); !strings.Contains(out, "evidence intact") {
		t.Errorf("evidence verify: %s", out)
	}
	t.Logf("%d tasks in %s on 3 nodes (%s paused for %s; %s killed twice, with %v tasks completed); %s",
		total, took.Round(time.Millisecond), paused.name, pausedFor.Round(time.Millisecond), victim.name, atKill, c.summary())
}

// enqueueSlow enqueues a slow task, the most urgent, with one attempt.
func (c *cluster) enqueueSlow() *host.TaskRecord {
	c.t.Helper()
	rec, err := c.store.Enqueue(context.Background(), host.TaskIntent{TaskType: "multinode.slow", Source: "test", Priority: host.Priority(1), Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		c.t.Fatal(err)
	}
	return rec
}

// awaitRunning waits until task runs its attempt-th attempt.
func (c *cluster) awaitRunning(task *host.TaskRecord, attempt int) *host.TaskRecord {
	c.t.Helper()
	var rec *host.TaskRecord
	c.await("task "+task.TaskType+" to run", func() bool {
		var err error
		if rec, err = c.store.Task(context.Background(), task.TaskID); err != nil {
			c.t.Fatal(err)
		}
		return rec.Status == host.TaskRunning && rec.AttemptCount == attempt
	})
	return rec
}

// recentAttempts are the last thousand attempts recorded.
func (c *cluster) recentAttempts() []*host.Attempt {
	c.t.Helper()
	atts, err := c.store.ListAttempts(context.Background(), host.AttemptFilter{Limit: 1000})
	if err != nil {
		c.t.Fatal(err)
	}
	return atts
}

// checkSettledOnce checks that every task of ids completed, with exactly
// one task_finished event and one accepted completed attempt (attempts
// whose settlement was refused are evidence, not settlements), and that
// each node completed some. It returns when the last of them finished.
func (c *cluster) checkSettledOnce(ids, names []string) (last time.Time) {
	c.t.Helper()
	ctx := context.Background()
	for _, id := range ids {
		rec, err := c.store.Task(ctx, id)
		if err != nil {
			c.t.Fatalf("task %s lost: %v", id, err)
		}
		if rec.Status != host.TaskCompleted {
			c.t.Errorf("task %s ended %s: %s", id, rec.Status, rec.LastError)
		}
		if rec.FinishedAt != nil && rec.FinishedAt.After(last) {
			last = *rec.FinishedAt
		}
	}
	// Events are listed once a link pass placed them, just after the
	// statuses they record are visible.
	c.await("every task's task_finished event", func() bool { return len(c.events(host.EventTaskFinished, "")) >= len(ids) })
	finished := map[string]int{}
	for _, e := range c.events(host.EventTaskFinished, "") {
		finished[e.TaskID]++
	}
	refused := map[string]bool{}
	for _, e := range c.events(settleRefused, "") {
		refused[e.AttemptID] = true
	}
	accepted := map[string]int{}
	share := map[string]int{}
	for _, a := range c.attempts("hello.c") {
		if a.Outcome == abi.Completed && !refused[a.AttemptID] {
			accepted[a.TaskID]++
			share[a.RunnerID[:strings.LastIndexByte(a.RunnerID, '-')]]++
		}
	}
	for _, id := range ids {
		if finished[id] != 1 || accepted[id] != 1 {
			c.t.Errorf("task %s: %d task_finished events, %d accepted completed attempts; want 1 and 1", id, finished[id], accepted[id])
		}
	}
	for _, name := range names {
		if share[name] == 0 {
			c.t.Errorf("%s completed no task: %v", name, share)
		}
	}
	return last
}

// summary says what each node completed, and how many attempts were
// reclaimed and refused.
func (c *cluster) summary() string {
	share := map[string]int{}
	for _, a := range c.attempts("hello.c") {
		if a.Outcome == abi.Completed {
			share[a.RunnerID]++
		}
	}
	reclaimed := map[string]int{}
	for _, e := range c.events(host.EventBootSweepReclaimed, "") {
		var d struct {
			RunnerID string `json:"runner_id"`
		}
		json.Unmarshal(e.Data, &d)
		reclaimed[d.RunnerID]++
	}
	return fmt.Sprintf("completed attempts per runner %v (%d settlements refused); reclaimed per runner %v",
		share, len(c.events(settleRefused, "")), reclaimed)
}

// serve refuses a lease that is not positive and a runner id that is not
// an id, as usage errors naming the flag, before it opens anything.
func TestServeLeaseAndRunnerFlags(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--lease", "0s"}, "--lease 0s: must be positive"},
		{[]string{"serve", "--lease", "-2s"}, "--lease -2s: must be positive"},
		{[]string{"serve", "--runner-id", strings.Repeat("n", 129)}, "--runner-id"},
	} {
		code, _, errs := h.run(c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d %q, want %d naming %q", c.args, code, errs, exitUsage, c.want)
		}
	}
	if _, err := os.Stat(h.home); err == nil {
		t.Error("a refused serve made its home")
	}
}

// TestOpenwopRunPausedNodeOnPostgres: an openwop run is held by the node
// executing it under a lease, on PostgreSQL as a task is. Its node is
// stopped with SIGSTOP while the run's only node runs (one that sleeps
// until its 5 s limit, then fails); the other node continues the run once
// the lease ran out (run.resumed, the node run again as attempt 1), and
// when the paused node is continued its late step is refused: the run
// ends once, with the events of one execution after the takeover.
func TestOpenwopRunPausedNodeOnPostgres(t *testing.T) {
	c := newCluster(t, "node-a", "node-b")
	a, b := c.nodes["node-a"], c.nodes["node-b"]
	c.start(a)
	c.start(b)
	base := a.cur.baseURL(t)
	def := `{"workflowId":"slow-run","nodes":[{"id":"slow","typeId":"hostile.sleep-past-deadline"}]}`
	if code, body := get(t, "POST", base+"/v1/openwop/workflows", "", def); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body := get(t, "POST", base+"/v1/runs", "", `{"workflowId":"slow-run"}`)
	var run struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal([]byte(body), &run); code != http.StatusCreated || run.RunID == "" {
		t.Fatalf("start run: %d %s", code, body)
	}
	runstest.Wait(t, c.store, run.RunID, func(_ *host.Run, evs []host.RunEvent) bool {
		return runstest.Count(evs, host.RunEventNodeStarted, "slow") == 1
	})
	if err := a.cur.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	runstest.Wait(t, c.store, run.RunID, func(_ *host.Run, evs []host.RunEvent) bool {
		return runstest.Count(evs, host.RunEventResumed, "slow") == 1
	})
	// Continued while b executes the run: a's sleep is past its limit, and
	// its next step (the node's failure) must be refused.
	if err := a.cur.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.await("the paused node's late step to be refused", func() bool {
		return strings.Contains(a.cur.logs.String(), "openwop run stopped here")
	})
	r, evs := runstest.Wait(t, c.store, run.RunID, func(r *host.Run, _ []host.RunEvent) bool { return host.RunTerminal(r.Status) })
	if r.Holder != b.runner {
		t.Fatalf("run ended held by %q, want %q (the node that took it over)", r.Holder, b.runner)
	}
	terminal := 0
	for _, e := range evs {
		if e.Type == host.RunEventCompleted || e.Type == host.RunEventFailed || e.Type == host.RunEventCancelled {
			terminal++
		}
	}
	if terminal != 1 || evs[len(evs)-1].Type != host.RunEventFailed ||
		runstest.Count(evs, host.RunEventNodeStarted, "slow") != 2 || runstest.Count(evs, host.RunEventNodeFailed, "slow") > 1 {
		t.Fatalf("run %s: events %s", r.Status, runstest.Types(evs))
	}
	var resumed struct {
		Attempt     int  `json:"attempt"`
		Interrupted bool `json:"interrupted"`
	}
	for _, e := range evs {
		if e.Type == host.RunEventResumed {
			json.Unmarshal(e.Payload, &resumed)
		}
	}
	if resumed.Attempt != 1 || !resumed.Interrupted {
		t.Fatalf("run.resumed %+v", resumed)
	}
	// Nothing a wrote lands after the run ended.
	time.Sleep(200 * time.Millisecond)
	if _, again := runstest.Wait(t, c.store, run.RunID, func(*host.Run, []host.RunEvent) bool { return true }); len(again) != len(evs) {
		t.Fatalf("events after the run ended: %s", runstest.Types(again[len(evs):]))
	}
}
