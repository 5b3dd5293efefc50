package storetest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	c := NewClock()
	if !c.Now().Equal(Epoch) {
		t.Fatalf("starts at %v, want %v", c.Now(), Epoch)
	}
	if got := c.Add(1500 * time.Millisecond); !got.Equal(Epoch.Add(1500*time.Millisecond)) || !c.Now().Equal(got) {
		t.Fatalf("Add: %v, now %v", got, c.Now())
	}
	c.Set(time.Date(2030, 1, 2, 4, 4, 5, 0, time.FixedZone("x", 3600)))
	if now := c.Now(); now.Location() != time.UTC || !now.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("Set: %v", now)
	}
}
