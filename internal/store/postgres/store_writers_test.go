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
	dsn := pgtest.DSN(t)
	for _, c := range []struct{ set, want int }{{0, nearWriters}, {3, 3}} { // this machine's database: near
		s, err := Open(ctx, dsn, Options{LeaseTTL: 10 * time.Second, Writers: c.set})
		if err != nil {
			t.Fatal(err)
		}
		if s.opts.Writers != c.want {
			t.Errorf("Options.Writers %d: the store runs %d writers, want %d", c.set, s.opts.Writers, c.want)
		}
		s.Close()
	}
}
