package ratelimit

import (
	"testing"
	"time"
)

// A bucket starts full, refuses once empty with the wait until the next
// token, refills at its rate up to its burst, and keys do not share.
func TestBuckets(t *testing.T) {
	var bs Buckets
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := bs.Take("a", now, 1, 3); !ok {
			t.Fatalf("take %d of a full bucket of 3 refused", i)
		}
	}
	ok, wait := bs.Take("a", now, 1, 3)
	if ok || wait != time.Second {
		t.Fatalf("empty bucket: %v, wait %v (want refused, 1s)", ok, wait)
	}
	if ok, _ := bs.Take("b", now, 1, 3); !ok {
		t.Fatal("another key shares a's bucket")
	}
	now = now.Add(500 * time.Millisecond)
	if ok, wait := bs.Take("a", now, 1, 3); ok || wait != 500*time.Millisecond {
		t.Fatalf("half refilled: %v, wait %v", ok, wait)
	}
	now = now.Add(time.Hour)
	for i := range 3 {
		if ok, _ := bs.Take("a", now, 1, 3); !ok {
			t.Fatalf("after an hour, take %d refused: the bucket holds its burst", i)
		}
	}
	if ok, _ := bs.Take("a", now, 1, 3); ok {
		t.Fatal("refilled past its burst")
	}
}
