package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// Two stores (nodes) on one database fire the same due slot of one
// schedule at the same moment, many times over: each slot gets exactly
// one task and one schedule_runs row, and the firings that found it taken
// or no longer due create nothing.
func TestScheduleSlotRaceTwoStores(t *testing.T) {
	clk := newClock()
	stores := nodes(t, 2, clk)
	start := clk.Now()
	sched, err := stores[0].CreateSchedule(ctx, host.ScheduleSpec{Name: "tick", IntervalSeconds: 1,
		Task: host.TaskIntent{TaskType: "demo.tick", Payload: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	const slots = 25
	var mu sync.Mutex
	created := 0
	for round := range slots {
		at := start.Add(time.Duration(round+1) * time.Second)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for _, s := range stores {
			for range 2 { // and two firings on each node
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-gate
					got, err := s.FireDueSchedules(ctx, at)
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					created += len(got)
					mu.Unlock()
				}()
			}
		}
		close(gate)
		wg.Wait()
	}
	var runs, tasks int
	if err := stores[1].pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT task_id) FROM schedule_runs WHERE schedule_id = $1`, sched.ScheduleID).Scan(&runs, &tasks); err != nil {
		t.Fatal(err)
	}
	all, err := stores[1].ListTasks(ctx, host.TaskFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]bool{}
	for _, task := range all {
		if sources[task.Source] {
			t.Fatalf("two tasks for slot %s", task.Source)
		}
		sources[task.Source] = true
	}
	if runs != slots || tasks != slots || len(all) != slots || created != slots {
		t.Fatalf("%d schedule_runs rows, %d tasks named there, %d tasks, %d returned by the firings: want %d each", runs, tasks, len(all), created, slots)
	}
	for round := range slots {
		if !sources[host.ScheduleSource(sched.ScheduleID, start.Add(time.Duration(round+1)*time.Second))] {
			t.Fatalf("slot %d has no task", round+1)
		}
	}
	verify(t, stores[0])
}

// race runs fn on each store at once, after a common start.
func race(stores []*Store, fn func(i int, s *Store)) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			fn(i, s)
		}()
	}
	close(gate)
	wg.Wait()
}

// Two nodes publishing the next message of one sender at once, both
// naming the same head: one is accepted, the other refused as a fork of
// the sender's chain (the chain head's row lock orders them).
func TestSenderChainRaceTwoStores(t *testing.T) {
	stores := nodes(t, 2, newClock())
	prepare := func(n int, prev string) *host.MessageInput {
		in, err := message.Prepare(ctx, &message.Request{Format: message.FormatEnvelope, Document: messagetest.Envelope(n, "alice", "flag", prev)},
			message.Options{Origin: "api", Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	first := prepare(1, messagetest.ZeroHash)
	if _, err := stores[0].PublishMessage(ctx, first); err != nil {
		t.Fatal(err)
	}
	head, n := first.Hash, 2
	for range 10 {
		ins := []*host.MessageInput{prepare(n, head), prepare(n+1, head)}
		n += 2
		errs := make([]error, 2)
		race(stores, func(i int, s *Store) { _, errs[i] = s.PublishMessage(ctx, ins[i]) })
		switch {
		case errs[0] == nil && errs[1] != nil:
			head = ins[0].Hash
			wantErr(t, errs[1], host.ErrValidation)
		case errs[1] == nil && errs[0] != nil:
			head = ins[1].Hash
			wantErr(t, errs[0], host.ErrValidation)
		default:
			t.Fatalf("both forks of head %s: %v, %v", head, errs[0], errs[1])
		}
	}
	page, err := stores[1].ListMessages(ctx, host.MessageQuery{From: "alice", Limit: 100})
	if err != nil || len(page.Messages) != 11 {
		t.Fatalf("%d messages accepted, want 11 (%v)", len(page.Messages), err)
	}
	for i, m := range page.Messages[1:] {
		if m.PrevHash != page.Messages[i].Hash {
			t.Fatalf("message %s follows %s, not %s", m.MessageID, m.PrevHash, page.Messages[i].Hash)
		}
	}
	verify(t, stores[0])
}

// Two nodes starting one workflow instance at once: one creates it (and
// its first task), the other finds it.
func TestStartWorkflowRaceTwoStores(t *testing.T) {
	stores := nodes(t, 2, newClock())
	for round := range 10 {
		key := fmt.Sprint("goal-", round)
		recs := make([]*host.WorkflowRecord, 2)
		created := make([]bool, 2)
		race(stores, func(i int, s *Store) {
			var err error
			if recs[i], created[i], err = s.StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: key}); err != nil {
				t.Error(err)
			}
		})
		if t.Failed() {
			return
		}
		if created[0] == created[1] || recs[0].WorkflowID != recs[1].WorkflowID {
			t.Fatalf("round %d: created %v, records %s and %s", round, created, recs[0].WorkflowID, recs[1].WorkflowID)
		}
	}
	all, err := stores[0].ListTasks(ctx, host.TaskFilter{Limit: 100})
	if err != nil || len(all) != 10 {
		t.Fatalf("%d tasks, want one per instance (%v)", len(all), err)
	}
	verify(t, stores[1])
}

// Two nodes recording sensor events (other dedupe keys) that propose one
// workflow instance at once: one creates the record and its first task,
// the other's event is deduped onto it.
func TestSensorProposedWorkflowRaceTwoStores(t *testing.T) {
	stores := nodes(t, 2, newClock())
	for round := range 10 {
		recs := make([]*host.SensorEventRecord, 2)
		race(stores, func(i int, s *Store) {
			ev, err := host.DecodeSensorEvent([]byte(fmt.Sprintf(`{"sensor_id":"s","event_id":"e%d","observed_at":"2026-03-01T10:00:00Z",
				"source_ref":"r","dedupe_key":"k%d-%d","payload":{},"proposed_workflow":{"template":"goal-loop","instance_key":"ticket-%d"}}`,
				i, round, i, round)), "")
			if err == nil {
				recs[i], err = s.RecordSensorEvent(ctx, ev, host.SensorEventOptions{})
			}
			if err != nil {
				t.Error(err)
			}
		})
		if t.Failed() {
			return
		}
		statuses := map[host.SensorEventStatus]int{recs[0].Status: 1}
		statuses[recs[1].Status]++
		if statuses[host.SensorWorkflowCreated] != 1 || statuses[host.SensorWorkflowDeduped] != 1 || recs[0].WorkflowID != recs[1].WorkflowID {
			t.Fatalf("round %d: %+v and %+v", round, recs[0], recs[1])
		}
	}
	if all, err := stores[0].ListTasks(ctx, host.TaskFilter{Limit: 100}); err != nil || len(all) != 10 {
		t.Fatalf("%d tasks, want one per instance (%v)", len(all), err)
	}
	verify(t, stores[1])
}

// Two nodes replacing one pack's subscriptions at once: the result is
// one node's set, whole.
func TestSetPackSubscriptionsRaceTwoStores(t *testing.T) {
	stores := nodes(t, 2, newClock())
	sets := [][]host.Subscription{
		{{Pack: "local.p", Node: "a", TaskType: "message:a", Topics: []string{"flag"}}, {Pack: "local.p", Node: "b", TaskType: "message:b", Topics: []string{"*"}}},
		{{Pack: "local.p", Node: "c", TaskType: "message:c", Topics: []string{"query"}}},
	}
	for range 10 {
		race(stores, func(i int, s *Store) {
			if err := s.SetPackSubscriptions(ctx, "local.p", sets[i]); err != nil {
				t.Error(err)
			}
		})
		got, err := stores[0].Subscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var nodes []string
		for _, sub := range got {
			nodes = append(nodes, sub.Node)
		}
		if n := strings.Join(nodes, ","); n != "a,b" && n != "c" {
			t.Fatalf("subscriptions of nodes %s: not one node's set", n)
		}
	}
}

// Two nodes expiring messages at once: each delivery is dead-lettered
// once.
func TestExpireMessagesRaceTwoStores(t *testing.T) {
	clk := newClock()
	stores := nodes(t, 2, clk)
	if err := stores[0].SetPackSubscriptions(ctx, "local.p", []host.Subscription{
		{Pack: "local.p", Node: "a", TaskType: "message:a", Topics: []string{"*"}},
		{Pack: "local.p", Node: "b", TaskType: "message:b", Topics: []string{"*"}},
	}); err != nil {
		t.Fatal(err)
	}
	const msgs = 20
	for i := range msgs {
		in, err := message.Prepare(ctx, &message.Request{Format: message.FormatBus, Document: messagetest.Crisis(messagetest.BusID(i), "emotion_recognition")},
			message.Options{Origin: "api", Now: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		in.ExpiresAt = clk.Now().Add(time.Minute)
		if _, err := stores[i%2].PublishMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	later := clk.Add(time.Hour)
	expired := make([]int, 2)
	race(stores, func(i int, s *Store) {
		var err error
		if expired[i], err = s.ExpireMessages(ctx, later); err != nil {
			t.Error(err)
		}
	})
	if expired[0]+expired[1] != 2*msgs {
		t.Fatalf("expired %d and %d, want %d in all", expired[0], expired[1], 2*msgs)
	}
	if n := len(events(t, stores[1], host.EventFilter{Type: host.EventMessageDeadLettered})); n != 2*msgs {
		t.Fatalf("%d message_dead_lettered events, want %d", n, 2*msgs)
	}
	verify(t, stores[0])
}
