package storecore

import (
	"context"
	"sync"
	"testing"
	"time"
)

// The sequencer integrates the backlog when started, again when woken,
// what is pending when closed, records each appended entry's delay once
// it is integrated, and its goroutine has ended when Close returns.
func TestSequencer(t *testing.T) {
	var (
		mu       sync.Mutex
		chain    uint64 // entries appended
		log      uint64 // entries integrated
		runs     int
		appended = make(chan struct{}, 8)
	)
	integrate := func(_ context.Context, max int) (int, uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		runs++
		n := min(chain-log, uint64(max))
		log += n
		if n > 0 {
			select {
			case appended <- struct{}{}:
			default:
			}
		}
		return int(n), log, nil
	}
	chain = LogBatch + 5 // a backlog of more than one batch
	q := NewSequencer(integrate, time.Millisecond, 0, 0)
	q.Start()
	if err := q.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if log != LogBatch+5 {
		t.Fatalf("backlog: %d integrated, want %d", log, LogBatch+5)
	}
	chain += 3
	mu.Unlock()
	for len(appended) > 0 {
		<-appended // the backlog's
	}
	q.Appended(int64(chain))
	<-appended // woken, it integrates without being asked
	mu.Lock()
	chain += 2 // pending when closed
	mu.Unlock()
	q.Appended(int64(chain))
	q.Close()
	select {
	case <-q.done:
	default:
		t.Fatal("the sequencer's goroutine still runs after Close")
	}
	mu.Lock()
	defer mu.Unlock()
	if log != chain {
		t.Fatalf("after Close: %d integrated of %d", log, chain)
	}
	if d := q.Delays(); len(d) != 2 {
		t.Fatalf("%d delays recorded, want 2 (one per Appended)", len(d))
	}
}
