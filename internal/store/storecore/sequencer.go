package storecore

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Sequencer runs a driver's evidence log integration (IntegrateLog in a
// write transaction of its own) in the background: woken when the
// driver's writes appended chain entries (Appended), after gathering
// for a moment (at least gather, and at least every since the last
// integration began, so that under load a batch, and its signature, is
// paid for by many entries), and every poll interval (for the entries other nodes
// appended on a shared database). It integrates everything pending in
// batches of LogBatch, the backlog of a home's chain from before the log
// first, right after the store opens. It measures how long an entry of
// this store waited between being durable (Appended) and provable (its
// batch integrated): Delays.
type Sequencer struct {
	integrate           func(ctx context.Context, max int) (n int, size uint64, err error)
	gather, every, poll time.Duration
	last                time.Time // when the loop's last integration began
	wake, stop          chan struct{}
	done                chan struct{}
	closeOnce           sync.Once
	started             bool
	run                 sync.Mutex // one integration at a time in this store

	mu      sync.Mutex
	marks   []logMark       // entries appended, not yet integrated
	delays  []time.Duration // the last maxDelays delays, a ring
	next    int
	lastErr error
}

type logMark struct {
	seq int64
	at  time.Time
}

// maxDelays is how many integration delays a Sequencer keeps.
const maxDelays = 1 << 14

// NewSequencer returns a sequencer, not started: integrate runs
// IntegrateLog for up to max entries in one write transaction and
// returns what it did.
func NewSequencer(integrate func(ctx context.Context, max int) (int, uint64, error), gather, every, poll time.Duration) *Sequencer {
	q := &Sequencer{integrate: integrate, gather: gather, every: every, poll: poll,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	q.wake <- struct{}{} // the backlog
	return q
}

// Start starts the sequencer's goroutine; call it once, from the
// goroutine that calls Close.
func (q *Sequencer) Start() {
	q.started = true
	go q.loop()
}

// Appended tells the sequencer the store's writes made the chain entries
// up to seq durable.
func (q *Sequencer) Appended(seq int64) { q.AppendedAt(seq, time.Now()) }

// AppendedAt is Appended for entries durable since at (a driver that
// gives entries their places after they commit).
func (q *Sequencer) AppendedAt(seq int64, at time.Time) {
	q.mu.Lock()
	q.marks = append(q.marks, logMark{seq: seq, at: at})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *Sequencer) loop() {
	defer close(q.done)
	var tick <-chan time.Time
	if q.poll > 0 {
		t := time.NewTicker(q.poll)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-q.stop:
			_ = q.Sync(context.Background()) // kept for LogSync
			return
		case <-q.wake:
			if wait := max(q.gather, q.every-time.Since(q.last)); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-t.C:
				case <-q.stop:
					t.Stop()
				}
			}
		case <-tick:
		}
		q.last = time.Now()
		_ = q.Sync(context.Background()) // kept for LogSync

	}
}

// Sync integrates every entry committed before it was called (and any
// committed meanwhile), in batches of LogBatch.
func (q *Sequencer) Sync(ctx context.Context) error {
	q.run.Lock()
	defer q.run.Unlock()
	for {
		n, size, err := q.integrate(ctx, LogBatch)
		q.mu.Lock()
		q.lastErr = err
		if err == nil {
			now := time.Now()
			i := 0
			for ; i < len(q.marks) && q.marks[i].seq <= int64(size); i++ {
				q.record(now.Sub(q.marks[i].at))
			}
			q.marks = slices.Delete(q.marks, 0, i)
		}
		q.mu.Unlock()
		if err != nil || n < LogBatch {
			return err
		}
	}
}

func (q *Sequencer) record(d time.Duration) {
	if len(q.delays) < maxDelays {
		q.delays = append(q.delays, d)
		return
	}
	q.delays[q.next] = d
	q.next = (q.next + 1) % maxDelays
}

// Delays returns the integration delays measured lately (at most the
// last 16384), in no order, and drops them.
func (q *Sequencer) Delays() []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.delays
	q.delays, q.next = nil, 0
	return out
}

// Err is the last integration's error (nil when it succeeded).
func (q *Sequencer) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lastErr
}

// Close integrates what is pending and stops the sequencer; the store's
// writer must still take writes until it returns.
func (q *Sequencer) Close() {
	if !q.started {
		return
	}
	q.closeOnce.Do(func() { close(q.stop) })
	<-q.done
}
