package dispatch

import (
	"context"
	"sync"
	"time"
)

// scheduleRefresh is how often the dispatcher re-reads the earliest
// next_run_at (another process may have changed the schedules).
const scheduleRefresh = time.Second

// schedules is what the dispatcher knows of the recurring schedules: the
// earliest next_run_at, read at most every scheduleRefresh (or at once
// after SchedulesChanged), so that a claim costs no write when nothing is
// due.
type schedules struct {
	mu   sync.Mutex
	next time.Time // earliest next_run_at; zero: none enabled
	read time.Time // when next was read; zero: read it again
	// expired is when message deliveries were last checked for an
	// expired ttl (expireMessages).
	expired time.Time
}

// SchedulesChanged tells the dispatcher the schedules changed (created,
// updated, resumed): it re-reads when the next one is due.
func (d *Dispatcher) SchedulesChanged() {
	d.sched.mu.Lock()
	d.sched.read = time.Time{}
	d.sched.mu.Unlock()
	d.Wake()
}

// fireDueSchedules enqueues the tasks of the schedules due at now (the agent runtime schema
// §11b: dispatch evaluates due schedules before claiming). It runs while
// the dispatcher holds the dispatch lock, in one worker at a time (the
// others skip it and claim), and writes only when a schedule is due.
func (d *Dispatcher) fireDueSchedules(ctx context.Context, now time.Time) {
	s := &d.sched
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	b := d.cfg.Backend
	if s.read.IsZero() || now.Sub(s.read) >= scheduleRefresh {
		next, ok, err := b.NextScheduleRun(ctx)
		if err != nil {
			return // the claim that follows will say the store is failing
		}
		s.next, s.read = time.Time{}, now
		if ok {
			s.next = next
		}
	}
	if s.next.IsZero() || now.Before(s.next) {
		return
	}
	if d.cfg.BeforeFire != nil {
		d.cfg.BeforeFire(ctx)
	}
	tasks, err := b.FireDueSchedules(ctx, now)
	if err != nil {
		d.cfg.Log("firing due schedules failed", "error", err)
		return
	}
	s.read = time.Time{}
	if len(tasks) > 0 {
		d.Wake()
	}
}

// expireMessages dead-letters the deliveries whose message's ttl ran out
// before their task started (host.Messages.ExpireMessages), at most every
// scheduleRefresh, in one worker at a time, before claiming: so an expired
// message's task is never claimed after the check.
func (d *Dispatcher) expireMessages(ctx context.Context, now time.Time) {
	s := &d.sched
	if !s.mu.TryLock() {
		return
	}
	defer s.mu.Unlock()
	if now.Sub(s.expired) < scheduleRefresh {
		return
	}
	s.expired = now
	if _, err := d.cfg.Backend.ExpireMessages(ctx, now); err != nil {
		d.cfg.Log("dead-lettering expired messages failed", "error", err)
	}
}
