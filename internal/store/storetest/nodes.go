package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// NodesOpener opens n stores on one fresh, empty database, as n
// processes (n nodes) sharing it would, each reading now from clock, and
// closes them when t ends.
type NodesOpener func(t testing.TB, clock *Clock, n int) []host.Backend

// Nodes checks what the interfaces promise across processes sharing one
// database: no task handed to two claimers, a schedule slot fired once,
// a sensor dedupe key and a message id accepted once, one evidence chain
// however the nodes interleave their writes, the dispatch lock excluding
// the other nodes, and every node reading what another wrote at once
// (memory, routes, specs, agents, installed packs and the packs
// generation), whatever it caches.
func Nodes(t *testing.T, open NodesOpener) { NodesOnly(t, open) }

// nodeScenario is a named scenario of several nodes on one database.
type nodeScenario struct {
	name string
	run  func(f *fixture, nodes []host.Backend)
}

// nodeScenarios are Nodes' scenarios.
var nodeScenarios = []nodeScenario{
	{"ClaimsAcrossNodes", nodesClaims},
	{"ScheduleSlotsAcrossNodes", nodesScheduleSlots},
	{"SensorDedupeAcrossNodes", nodesSensorDedupe},
	{"MessageDedupeAcrossNodes", nodesMessageDedupe},
	{"ChainAcrossNodes", nodesChain},
	{"RunClaimsAcrossNodes", nodesRunClaims},
	{"ReadsSeeOtherNodesWrites", nodesReadsSeeWrites},
	{"LogAcrossNodes", nodesLog},
}

// NodesOnly runs the scenarios of Nodes named (none: all of them), for a
// backend that implements only some areas so far.
func NodesOnly(t *testing.T, open NodesOpener, names ...string) {
	for _, name := range names {
		if !slices.ContainsFunc(nodeScenarios, func(sc nodeScenario) bool { return sc.name == name }) {
			t.Fatalf("no Nodes scenario is named %q", name)
		}
	}
	for _, sc := range nodeScenarios {
		if len(names) > 0 && !slices.Contains(names, sc.name) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			c := NewClock()
			nodes := open(t, c, 3)
			if len(nodes) != 3 {
				t.Fatalf("the opener gave %d stores, want 3", len(nodes))
			}
			f := &fixture{t: t, b: nodes[0], clock: c}
			sc.run(f, nodes)
			if t.Failed() {
				return
			}
			for i, b := range nodes {
				g := &fixture{t: t, b: b, clock: c}
				if rep := g.verifyChain(); i > 0 && rep.Head != f.verifyChain().Head {
					t.Fatalf("node %d sees another chain head", i)
				}
				g.checkEvents()
			}
		})
	}
}

// eachNode runs fn for each node at once, rounds times, and waits.
func eachNode(t *testing.T, nodes []host.Backend, rounds int, fn func(node, round int, b host.Backend) error) {
	t.Helper()
	for r := range rounds {
		var wg sync.WaitGroup
		for i, b := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := fn(i, r, b); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
}

// repeat is one store n times, for racing callers of one store.
func repeat(b host.Backend, n int) []host.Backend {
	out := make([]host.Backend, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// raceClaims has each of claimers (stores, or one store repeated) claim
// at once until none is available, and returns who claimed each task
// (its index in claimers). No task may be claimed twice, and tasks must
// all be.
func raceClaims(f *fixture, claimers []host.Backend, tasks int) map[string]int {
	t := f.t
	var mu sync.Mutex
	seen := map[string]int{}
	eachNode(t, claimers, 1, func(i, _ int, b host.Backend) error {
		for {
			rec, err := b.Claim(ctx, fmt.Sprint("runner-", i), f.clock.Now())
			if errors.Is(err, host.ErrEmpty) {
				return nil
			}
			if err != nil {
				return err
			}
			mu.Lock()
			if prev, dup := seen[rec.TaskID]; dup {
				t.Errorf("task %s claimed by runner %d and runner %d", rec.TaskID, prev, i)
			}
			seen[rec.TaskID] = i
			mu.Unlock()
		}
	})
	if len(seen) != tasks {
		t.Fatalf("%d of %d tasks claimed", len(seen), tasks)
	}
	return seen
}

func nodesClaims(f *fixture, nodes []host.Backend) {
	t := f.t
	const tasks = 60
	for i := range tasks {
		f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: fmt.Sprint("t", i%2)})
	}
	seen := raceClaims(f, append(append([]host.Backend{}, nodes...), nodes...), tasks)
	// The node that claimed a task settles it; every task ends once.
	for id, i := range seen {
		i %= len(nodes)
		task, err := nodes[(i+1)%len(nodes)].Task(ctx, id)
		if err != nil || task.Status != host.TaskRunning || task.AttemptCount != 1 {
			t.Fatalf("task %s read on another node: %+v %v", id, task, err)
		}
		if _, err := nodes[i].Finish(ctx, id, host.FinishInput{Record: newAttempt(task), Outcome: okOutcome()}); err != nil {
			t.Fatal(err)
		}
	}
	counts, err := nodes[2].CountTasks(ctx)
	if err != nil || counts[host.TaskCompleted] != tasks {
		t.Fatalf("counts %v %v", counts, err)
	}
}

// raceScheduleSlots fires a schedule of 1s from each of stores at the
// same instants, ten times: one task per slot.
func raceScheduleSlots(f *fixture, stores []host.Backend) {
	t := f.t
	s := f.createSchedule(scheduleSpec("tick", 1))
	start := f.clock.Now()
	var mu sync.Mutex
	created := 0
	eachNode(t, stores, 10, func(_, round int, b host.Backend) error {
		got, err := b.FireDueSchedules(ctx, start.Add(time.Duration(round+1)*time.Second))
		mu.Lock()
		created += len(got)
		mu.Unlock()
		return err
	})
	seen := map[string]bool{}
	for _, task := range f.tasks(host.TaskFilter{}) {
		if seen[task.Source] {
			t.Fatalf("two tasks for slot %s", task.Source)
		}
		seen[task.Source] = true
	}
	if created != 10 || len(seen) != 10 || !seen[host.ScheduleSource(s.ScheduleID, start.Add(time.Second))] ||
		!seen[host.ScheduleSource(s.ScheduleID, start.Add(10*time.Second))] {
		t.Fatalf("firings returned %d tasks; slots %v; want 10", created, seen)
	}
}

func nodesScheduleSlots(f *fixture, nodes []host.Backend) { raceScheduleSlots(f, nodes) }

// raceSensorDedupe records one event from each of stores at once, for
// ten dedupe keys: one accepted and one task per key.
func raceSensorDedupe(f *fixture, stores []host.Backend) {
	t := f.t
	f.routeDemo()
	eachNode(t, stores, 10, func(_, round int, b host.Backend) error {
		ev := sensorEvent(t, withTask)
		ev.DedupeKey = fmt.Sprint("k", round)
		_, err := b.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
		return err
	})
	evs, err := f.b.ListSensorEvents(ctx, host.SensorEventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	accepted := map[string]int{}
	for _, e := range evs {
		if e.Status == host.SensorTaskCreated {
			accepted[e.Event.DedupeKey]++
		}
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 10 || len(evs) != 10*len(stores) || len(accepted) != 10 {
		t.Fatalf("%d tasks, %d records, %d keys accepted; want 10, %d, 10", n, len(evs), len(accepted), 10*len(stores))
	}
	for k, n := range accepted {
		if n != 1 {
			t.Fatalf("key %s accepted %d times", k, n)
		}
	}
}

func nodesSensorDedupe(f *fixture, nodes []host.Backend) { raceSensorDedupe(f, nodes) }

func nodesMessageDedupe(f *fixture, nodes []host.Backend) {
	t := f.t
	f.subscribe("responder", "crisis.*")
	var mu sync.Mutex
	fresh := map[string]int{}
	eachNode(t, nodes, 8, func(_, round int, b host.Backend) error {
		in := prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(round), "emotion_recognition"), "")
		r, err := b.PublishMessage(ctx, in)
		if err == nil && !r.Duplicate {
			mu.Lock()
			fresh[in.MessageID]++
			mu.Unlock()
		}
		return err
	})
	if len(fresh) != 8 {
		t.Fatalf("%d messages accepted, want 8", len(fresh))
	}
	for id, n := range fresh {
		if n != 1 {
			t.Fatalf("message %s accepted %d times", id, n)
		}
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 8 {
		t.Fatalf("%d deliveries, want 8", n)
	}
	if n := len(f.events(host.EventFilter{Type: host.EventMessageDuplicate})); n != 16 {
		t.Fatalf("%d message_duplicate events, want 16", n)
	}
}

// nodesRunClaims: runs whose runner stopped are claimed by the nodes at
// once, each by exactly one.
func nodesRunClaims(f *fixture, nodes []host.Backend) {
	t := f.t
	const runs = 30
	for i := range runs {
		r := &host.Run{RunID: fmt.Sprintf("run_%02d", i), WorkflowID: "wf", Status: host.RunRunning, Holder: "gone", LeaseUntil: f.clock.Now()}
		if err := f.b.CreateRun(ctx, r, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Add(time.Second)
	var mu sync.Mutex
	holder := map[string]string{}
	eachNode(t, nodes, 3, func(node, _ int, b host.Backend) error {
		name := fmt.Sprint("node", node)
		got, err := b.ClaimRuns(ctx, name, f.clock.Now(), f.clock.Now().Add(time.Minute))
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range got {
			if prev, ok := holder[r.RunID]; ok {
				return fmt.Errorf("run %s claimed by %s and %s", r.RunID, prev, name)
			}
			holder[r.RunID] = name
		}
		return nil
	})
	if len(holder) != runs {
		t.Fatalf("%d runs claimed, want %d", len(holder), runs)
	}
	for id, name := range holder {
		r, err := nodes[2].Run(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Holder != name {
			t.Fatalf("run %s: holder %q; claimed by %s", id, r.Holder, name)
		}
	}
}

func nodesChain(f *fixture, nodes []host.Backend) {
	t := f.t
	eachNode(t, nodes, 8, func(node, round int, b host.Backend) error {
		id := fmt.Sprintf("n%d-%d", node, round)
		if _, err := b.Enqueue(ctx, intent("demo", nil), host.EnqueueOptions{}); err != nil {
			return err
		}
		if _, err := b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: id, Data: json.RawMessage(`{"node":` + fmt.Sprint(node) + `}`)}); err != nil {
			return err
		}
		return b.RecordAttempt(ctx, newAttempt(&host.TaskRecord{TaskID: id, AttemptCount: 1, Payload: json.RawMessage(`{}`)}))
	})
	if evs := f.checkEvents(); len(evs) != 3*8*3 {
		t.Fatalf("%d chain entries, want %d", len(evs), 3*8*3)
	}
	rep := f.verifyChain()
	if rep.Attempts != 24 {
		t.Fatalf("report %+v", rep)
	}
	// Each node anchors a head it committed (its own checkpoint, or one
	// shared with the nodes on its machine): one the chain holds, which
	// VerifyChain checked.
	for _, b := range nodes {
		f.waitAnchored(b, func(cp *host.ChainHead) bool { return cp.Seq > 0 && cp.Seq <= rep.HeadSeq })
	}
}

func nodesReadsSeeWrites(f *fixture, nodes []host.Backend) {
	t := f.t
	a, b := nodes[0], nodes[1]
	sc := host.Scope{Tenant: "acme", Namespace: "n"}
	// Read first on b, so that a cache there would hold the old answer.
	for i, want := range []string{"", `1`, `2`, ""} {
		got := ""
		if e, err := b.Get(ctx, sc, "k"); err == nil {
			got = string(e.Value)
		} else if !errors.Is(err, host.ErrNotFound) {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("step %d: node b reads %q, want %q", i, got, want)
		}
		var err error
		switch i {
		case 0:
			err = a.Put(ctx, sc, "k", json.RawMessage(`1`), host.PutOptions{})
		case 1:
			err = a.Put(ctx, sc, "k", json.RawMessage(`2`), host.PutOptions{})
		case 2:
			err = a.Delete(ctx, sc, "k")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// Routes, overrides, specs and agents.
	g := &fixture{t: t, b: b, clock: f.clock}
	if got := g.resolve("sum"); got != "<none>" {
		t.Fatal(got)
	}
	if err := a.SetPackTaskTypes(ctx, "local.p", []host.TaskTypeRoute{manifestRoute("sum", "p.one")}); err != nil {
		t.Fatal(err)
	}
	if got := g.resolve("sum"); got != "manifest:local.p/p.one" {
		t.Fatal(got)
	}
	if err := a.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "sum"}, Pack: "local.q", Node: "q.sum"}); err != nil {
		t.Fatal(err)
	}
	if got := g.resolve("sum"); got != "operator:local.q/q.sum" {
		t.Fatal(got)
	}
	if err := a.RemoveTaskTypeOverride(ctx, "sum"); err != nil {
		t.Fatal(err)
	}
	if got := g.resolve("sum"); got != "manifest:local.p/p.one" {
		t.Fatal(got)
	}
	if _, err := b.TaskTypeSpec(ctx, "sum"); !errors.Is(err, host.ErrNotFound) {
		t.Fatal(err)
	}
	if err := a.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "sum", DefaultModel: "m1"}); err != nil {
		t.Fatal(err)
	}
	if spec, err := b.TaskTypeSpec(ctx, "sum"); err != nil || spec.DefaultModel != "m1" {
		t.Fatalf("spec written on a: %+v %v", spec, err)
	}
	if list, err := b.ListAgents(ctx); err != nil || len(list) != 0 {
		t.Fatalf("agents %+v %v", list, err)
	}
	if _, err := a.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}); err != nil {
		t.Fatal(err)
	}
	if list, err := b.ListAgents(ctx); err != nil || len(list) != 1 {
		t.Fatalf("agent written on a: %+v %v", list, err)
	}
	// Installed packs: the generation moves on every node, the blobs
	// read everywhere.
	gen := b.PacksGeneration()
	if all, _ := b.ListPacks(ctx); len(all) != 0 {
		t.Fatal("packs before any install")
	}
	p := newTestPack("vendor.acme.hello", "1.0.0", "")
	rec, _, err := a.InstallPack(ctx, p.rec, p.blobs)
	if err != nil {
		t.Fatal(err)
	}
	if b.PacksGeneration() == gen {
		t.Fatal("an install on node a did not move node b's packs generation")
	}
	if all, err := b.ListPacks(ctx); err != nil || len(all) != 1 || all[0].SHA256 != rec.SHA256 {
		t.Fatalf("node b lists %+v %v", all, err)
	}
	if blob, err := nodes[2].PackBlob(ctx, rec.SHA256); err != nil || string(blob) != string(p.blobs.Archive) {
		t.Fatalf("node c reads the archive: %v", err)
	}
	gen = nodes[2].PacksGeneration()
	if err := b.UninstallPacks(ctx, []*host.InstalledPack{rec}); err != nil {
		t.Fatal(err)
	}
	if nodes[2].PacksGeneration() == gen {
		t.Fatal("an uninstall on node b did not move node c's packs generation")
	}
	// The dispatch lock excludes the other nodes.
	if _, err := a.AcquireDispatchLock(ctx, "node-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	_, err = b.AcquireDispatchLock(ctx, "node-b", time.Minute)
	wantErr(t, err, host.ErrLocked)
	f.clock.Add(2 * time.Minute)
	if l, err := nodes[2].AcquireDispatchLock(ctx, "node-c", time.Minute); err != nil || l.Holder != "node-c" {
		t.Fatalf("taking over the expired lock: %+v %v", l, err)
	}
}
