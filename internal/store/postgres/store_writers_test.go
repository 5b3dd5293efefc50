package postgres

import (
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/pgtest"
)

// A store near its database runs two writers, one a network away four;
// Options.Writers, when set, is kept.
func TestWritersByDistance(t *testing.T) {
	for _, c := range []struct {
		rtt  time.Duration
		want int
	}{{40 * time.Microsecond, nearWriters}, {nearRoundTrip, nearWriters}, {nearRoundTrip + 1, farWriters}, {3 * time.Millisecond, farWriters}} {
		if got := writersFor(c.rtt); got != c.want {
			t.Errorf("round trip %v: %d writers, want %d", c.rtt, got, c.want)
		}
	}
	// Whether this machine's database counts as near depends on the
	// machine's load at the time: the test checks that the count follows
	// the round trip the store measured, not what it measured.
	dsn := pgtest.DSN(t)
	for _, set := range []int{0, 3} {
		s, err := Open(ctx, dsn, Options{LeaseTTL: 10 * time.Second, Writers: set})
		if err != nil {
			t.Fatal(err)
		}
		want := set
		if set == 0 {
			if s.rtt <= 0 {
				t.Errorf("Options.Writers 0: no round trip measured")
			}
			want = writersFor(s.rtt)
		}
		if s.opts.Writers != want {
			t.Errorf("Options.Writers %d: the store runs %d writers, want %d (round trip %v)", set, s.opts.Writers, want, s.rtt)
		}
		s.Close()
	}
}
