package dispatch

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// emptyClaims counts the claims that found nothing.
type emptyClaims struct {
	host.Backend
	empty chan struct{}
}

func (c *emptyClaims) Claim(ctx context.Context, runner string, now time.Time) (*host.TaskRecord, error) {
	t, err := c.Backend.Claim(ctx, runner, now)
	if err != nil {
		select {
		case c.empty <- struct{}{}:
		default:
		}
	}
	return t, err
}

// dispatch_idle is appended once per busy → idle transition: not by an
// idle start, not by every poll of an idle queue.
func TestDispatchIdleOncePerTransition(t *testing.T) {
	e := newEnv(t, allGrants)
	c := &emptyClaims{Backend: e.backend, empty: make(chan struct{})}
	e.d.cfg.Backend, e.d.cfg.Workers, e.d.cfg.Poll = c, 2, time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.d.Run(ctx) }()
	polls := func(n int) {
		for range n {
			<-c.empty
		}
	}
	idles := func() []*host.Event {
		evs, err := e.backend.Events(context.Background(), host.EventFilter{Type: host.EventDispatchIdle})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	polls(20)
	if n := len(idles()); n != 0 {
		t.Fatalf("%d dispatch_idle before any task", n)
	}
	for round := 1; round <= 2; round++ {
		ids := enqueueHostTasks(t, e, 3)
		e.d.Wake()
		waitTerminal(t, e, ids)
		// The transition's event is appended after the claim that found
		// the queue empty, so it may land after the polls that follow:
		// wait for it, then poll more and see that no other came.
		for deadline := time.Now().Add(10 * time.Second); len(idles()) < round && time.Now().Before(deadline); {
			polls(1)
		}
		polls(20) // idle polls after the tasks ran
		evs := idles()
		if len(evs) != round {
			t.Fatalf("round %d: %d dispatch_idle events", round, len(evs))
		}
		var d struct {
			RunnerID string `json:"runner_id"`
			TasksRun int    `json:"tasks_run"`
		}
		if err := json.Unmarshal(evs[round-1].Data, &d); err != nil || d.RunnerID != e.d.cfg.RunnerID || d.TasksRun < 1 {
			t.Fatalf("dispatch_idle %s: %v", evs[round-1].Data, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
