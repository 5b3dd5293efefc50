package storecore

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

func TestTopicBounds(t *testing.T) {
	for _, c := range []struct {
		pattern, lo, hi, exact string
		all                    bool
	}{
		{pattern: "*", all: true},
		{pattern: "crisis.*", lo: "crisis.", hi: "crisis/"},
		{pattern: "a.b.*", lo: "a.b.", hi: "a.b/"},
		{pattern: "flag", exact: "flag"},
	} {
		all, lo, hi, exact := TopicBounds(c.pattern)
		if all != c.all || lo != c.lo || hi != c.hi || exact != c.exact {
			t.Errorf("%s: %v %q %q %q", c.pattern, all, lo, hi, exact)
		}
	}
}

func TestUpdateSchedule(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := NewSchedule("sched_1", &host.ScheduleSpec{Name: "x", IntervalSeconds: 60, Tenant: "acme",
		Task: host.TaskIntent{TaskType: "t", Payload: json.RawMessage(`{}`)}}, now)
	r.Task.Source = host.ScheduleTaskSource(r.ScheduleID) // as stored
	later := now.Add(time.Hour)
	same := r.Task
	if _, _, changed := UpdateSchedule(r, host.ScheduleUpdate{Task: &same}, later); changed {
		t.Fatal("the same task is a change")
	}
	off, on, every := false, true, int64(5)
	c, change, changed := UpdateSchedule(r, host.ScheduleUpdate{Enabled: &off}, later)
	if !changed || change != "paused" || c.Enabled || !c.NextRunAt.Equal(r.NextRunAt) || !c.UpdatedAt.Equal(later) || r.Enabled != true {
		t.Fatalf("pause: %s %+v (the original %+v)", change, c, r)
	}
	c, change, _ = UpdateSchedule(c, host.ScheduleUpdate{Enabled: &on}, later)
	if change != "resumed" || !c.NextRunAt.Equal(later.Add(time.Minute)) {
		t.Fatalf("resume: %s %+v", change, c)
	}
	c, change, _ = UpdateSchedule(c, host.ScheduleUpdate{IntervalSeconds: &every}, later)
	if change != "updated" || !c.NextRunAt.Equal(later.Add(5*time.Second)) {
		t.Fatalf("interval: %s %+v", change, c)
	}
}

func TestCheckChainHead(t *testing.T) {
	in := &host.MessageInput{MessageID: "m2", Sender: "alice", PrevHash: "h1"}
	for _, c := range []struct {
		found, chained bool
		head, prev     string
		ok             bool
	}{
		{found: false, prev: "anything", ok: true}, // the first message starts the chain
		{found: true, head: "h1", prev: "h1", ok: true},
		{found: true, head: "h0", prev: "h1"},         // a fork or a gap
		{found: true, head: "h1", chained: true},      // a chained sender left it out
		{found: true, head: "h1", prev: "", ok: true}, // an unchained sender
	} {
		in.PrevHash = c.prev
		err := CheckChainHead(in, c.found, c.head, "m1", c.chained)
		var he *host.Error
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &he) || he.Field != "prev_truth_state")) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestCheckAcceptedMessage(t *testing.T) {
	e := &host.Event{Seq: 7, Type: host.EventMessageAccepted, Data: json.RawMessage(`{"message_id":"m1","hash":"00","model_hash":"","tenant":"default"}`)}
	if brk := CheckAcceptedMessage(e, nil); brk == nil || brk.Problem != host.BreakMessageMissing || brk.MessageID != "m1" || brk.Seq != 7 {
		t.Fatalf("missing: %+v", brk)
	}
	if brk := CheckAcceptedMessage(e, &host.MessageRecord{Document: json.RawMessage(`{}`), Hash: "00", EventSeq: 7}); brk == nil || brk.Problem != host.BreakMessageHash {
		t.Fatalf("changed: %+v", brk)
	}
}
