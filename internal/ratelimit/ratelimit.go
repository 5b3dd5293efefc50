package ratelimit

import (
	"sync"
	"time"
)

// maxKeys bounds the buckets kept: keys (tokens, tenants) are few, and a
// flood of distinct ones is forgotten rather than kept (each then starts
// with a full bucket, which is the cost).
const maxKeys = 100_000

// Buckets is a token bucket per key. The zero value is ready to use; it is
// safe for concurrent use.
type Buckets struct {
	mu sync.Mutex
	b  map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// Take spends one token of key's bucket at now — a bucket of burst
// tokens, full when first seen, refilled at rate tokens a second — or
// refuses, saying how long until a token is there.
func (bs *Buckets) Take(key string, now time.Time, rate, burst float64) (ok bool, wait time.Duration) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	b := bs.b[key]
	if b == nil {
		if bs.b == nil || len(bs.b) >= maxKeys {
			bs.b = map[string]*bucket{}
		}
		b = &bucket{tokens: burst, last: now}
		bs.b[key] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}
