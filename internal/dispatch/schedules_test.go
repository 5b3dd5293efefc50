package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// fireCounter counts the store's FireDueSchedules calls.
type fireCounter struct {
	host.Backend
	fires atomic.Int32
}

func (f *fireCounter) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	f.fires.Add(1)
	return f.Backend.FireDueSchedules(ctx, now)
}

func runDispatcher(t *testing.T, e env) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A due schedule's task is enqueued by the dispatcher and run like any
// other.
func TestDispatchFiresDueSchedule(t *testing.T) {
	e := newEnv(t, allGrants)
	enqueueHostTasks(t, e, 0)
	ctx := context.Background()
	s, err := e.backend.CreateSchedule(ctx, host.ScheduleSpec{Name: "probe", IntervalSeconds: 1,
		Task: host.TaskIntent{TaskType: "probe.plain", Payload: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	e.d.cfg.Poll = 10 * time.Millisecond
	stop := runDispatcher(t, e)
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, err := e.backend.ListTasks(ctx, host.TaskFilter{Status: host.TaskCompleted})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) > 0 {
			if !strings.HasPrefix(tasks[0].Source, "schedule:"+s.ScheduleID+":") {
				t.Fatalf("task source %q", tasks[0].Source)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no scheduled task completed in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With no schedule due, claiming writes nothing for schedules.
func TestDispatchSchedulesCostNothingWhenNotDue(t *testing.T) {
	e := newEnv(t, allGrants)
	ctx := context.Background()
	if _, err := e.backend.CreateSchedule(ctx, host.ScheduleSpec{Name: "later", IntervalSeconds: 3600,
		Task: host.TaskIntent{TaskType: "probe.plain", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	ids := enqueueHostTasks(t, e, 8)
	w := &fireCounter{Backend: e.backend}
	e.d.cfg.Backend, e.d.cfg.Poll = w, 10*time.Millisecond
	stop := runDispatcher(t, e)
	waitTerminal(t, e, ids)
	stop()
	if n := w.fires.Load(); n != 0 {
		t.Fatalf("FireDueSchedules called %d times with nothing due", n)
	}
}
