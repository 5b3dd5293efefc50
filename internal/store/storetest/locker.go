package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Locker checks host.Locker: the dispatch lock is held by one holder at
// a time until it expires on the store's clock, renewed by its holder,
// released only by its holder, taken over once stale; each change an
// event.
func Locker(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"DispatchLock", lockerDispatchLock},
	})
}

func lockerDispatchLock(f *fixture) {
	t := f.t
	l, err := f.b.AcquireDispatchLock(ctx, "proc-a", time.Minute)
	if err != nil || l.Holder != "proc-a" || !l.AcquiredAt.Equal(f.clock.Now()) || !l.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("%+v %v", l, err)
	}
	_, err = f.b.AcquireDispatchLock(ctx, "proc-b", time.Minute)
	wantErr(t, err, host.ErrLocked)
	if !strings.Contains(err.Error(), "proc-a") {
		t.Fatalf("the refusal does not name the holder: %v", err)
	}
	// Renewing extends the expiry, keeps acquired_at, appends nothing.
	acquired := l.AcquiredAt
	f.clock.Add(30 * time.Second)
	if l, err = f.b.AcquireDispatchLock(ctx, "proc-a", time.Minute); err != nil || l.Holder != "proc-a" || !l.AcquiredAt.Equal(acquired) ||
		!l.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("renew: %+v %v", l, err)
	}
	// Not stale until it expires.
	f.clock.Add(time.Minute - time.Millisecond)
	_, err = f.b.AcquireDispatchLock(ctx, "proc-b", time.Minute)
	wantErr(t, err, host.ErrLocked)
	wantErr(t, f.b.ReleaseDispatchLock(ctx, "proc-b"), host.ErrNotFound)
	f.clock.Add(time.Minute) // proc-a died without releasing
	if l, err = f.b.AcquireDispatchLock(ctx, "proc-b", time.Minute); err != nil || l.Holder != "proc-b" {
		t.Fatalf("take over a stale lock: %+v %v", l, err)
	}
	wantErr(t, f.b.ReleaseDispatchLock(ctx, "proc-a"), host.ErrNotFound)
	if err := f.b.ReleaseDispatchLock(ctx, "proc-b"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.b.ReleaseDispatchLock(ctx, "proc-b"), host.ErrNotFound)
	if _, err := f.b.AcquireDispatchLock(ctx, "proc-a", time.Minute); err != nil {
		t.Fatal(err)
	}
	f.wantTypes("dispatch lock", f.eventTypes(""), "dispatch_locked", "dispatch_lock_stale_cleared", "dispatch_locked",
		"dispatch_lock_released", "dispatch_locked")
	stale := f.events(host.EventFilter{Type: host.EventDispatchLockStale})
	if d := eventData(t, stale[0]); d["holder"] != "proc-a" {
		t.Fatalf("dispatch_lock_stale_cleared %s", stale[0].Data)
	}
	for _, ttl := range []time.Duration{0, -time.Second} {
		_, err = f.b.AcquireDispatchLock(ctx, "x", ttl)
		wantErr(t, err, host.ErrValidation)
	}
}
