package postgres

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Three nodes work through a queue while runners keep "pausing" past
// their leases (the shared clock jumps) and any node reclaims expired
// leases: every task completes exactly once, none is lost, every late
// settle is refused, and the chain verifies.
func TestLeasesUnderContention(t *testing.T) {
	const tasks = 150
	clk := newClock()
	ns := nodes(t, 3, clk)
	for range tasks {
		if _, err := ns[0].Enqueue(ctx, intent("work", 5), host.EnqueueOptions{MaxAttempts: host.MaxMaxAttempts}); err != nil {
			t.Fatal(err)
		}
	}
	var settled, refused, pauses atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	done := make(chan struct{})
	for i, s := range ns {
		for j := range 3 {
			runner := fmt.Sprintf("node%d-w%d", i, j)
			rng := rand.New(rand.NewPCG(uint64(i), uint64(j)))
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					task, err := s.Claim(ctx, runner, time.Time{})
					if errorsIs(err, host.ErrEmpty) {
						if _, err := s.ReclaimExpired(ctx, time.Time{}); err != nil {
							errs <- err
							return
						}
						continue
					}
					if err != nil {
						errs <- err
						return
					}
					if rng.IntN(5) == 0 {
						// This runner pauses past its lease; another node
						// reclaims the task.
						pauses.Add(1)
						clk.Add(11 * time.Second)
						if _, err := ns[(i+1)%len(ns)].ReclaimExpired(ctx, time.Time{}); err != nil {
							errs <- err
							return
						}
					} else if _, err := s.Heartbeat(ctx, task.TaskID, runner, task.AttemptCount); err != nil && !errorsIs(err, host.ErrConflict) {
						errs <- err
						return
					}
					_, err = s.Finish(ctx, task.TaskID, okFinish(task))
					switch {
					case err == nil:
						settled.Add(1)
					case errorsIs(err, host.ErrConflict):
						refused.Add(1)
					default:
						errs <- err
						return
					}
				}
			})
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		counts, err := ns[0].CountTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if counts[host.TaskCompleted] == tasks {
			break
		}
		if time.Now().After(deadline) || len(errs) > 0 {
			close(done)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			t.Fatalf("not all tasks completed: %v", counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if settled.Load() != tasks {
		t.Fatalf("%d settles accepted for %d tasks", settled.Load(), tasks)
	}
	completed := map[string]int{}
	for _, e := range events(t, ns[1], host.EventFilter{Type: host.EventTaskFinished}) {
		completed[e.TaskID]++
	}
	if len(completed) != tasks {
		t.Fatalf("%d tasks finished, want %d", len(completed), tasks)
	}
	for id, n := range completed {
		if n != 1 {
			t.Fatalf("task %s finished %d times", id, n)
		}
	}
	notes := events(t, ns[2], host.EventFilter{Type: EventTaskSettleRefused})
	if int64(len(notes)) != refused.Load() {
		t.Fatalf("%d settles refused, %d task_settle_refused events", refused.Load(), len(notes))
	}
	rep := verify(t, ns[2])
	if rep.Attempts != settled.Load()+refused.Load() {
		t.Fatalf("%d attempts in the chain, want %d settled + %d refused", rep.Attempts, settled.Load(), refused.Load())
	}
	t.Logf("%d pauses, %d settles refused, %d chain entries", pauses.Load(), refused.Load(), rep.Events)
}
