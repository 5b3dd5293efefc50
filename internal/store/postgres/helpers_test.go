package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var ctx = context.Background()

// clock is a controllable clock shared by the stores (nodes) of a test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// nodes opens n stores on one fresh database, as n packrun nodes would,
// all on clk (nil: the real clock), with a lease of 10s.
func nodes(t testing.TB, n int, clk *clock) []*Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	opts := Options{LeaseTTL: 10 * time.Second}
	if clk != nil {
		opts.Now = clk.Now
	}
	out := make([]*Store, n)
	for i := range out {
		s, err := Open(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

func intent(typ string, prio int) host.TaskIntent {
	return host.TaskIntent{TaskType: typ, Source: "test", Priority: host.Priority(prio), Payload: json.RawMessage(`{"n": 1}`)}
}

func mustEnqueue(t testing.TB, s *Store, in host.TaskIntent) *host.TaskRecord {
	t.Helper()
	rec, err := s.Enqueue(ctx, in, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func mustClaim(t testing.TB, s *Store, runner string) *host.TaskRecord {
	t.Helper()
	rec, err := s.Claim(ctx, runner, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// attemptOf is the attempt a runner records for its claim of task.
func attemptOf(task *host.TaskRecord) *host.Attempt {
	return &host.Attempt{TaskID: task.TaskID, RunnerID: task.RunnerID, Attempt: task.AttemptCount, Pack: "local.test@1.0.0", Node: "n",
		Outcome: abi.Completed, Input: task.Payload, Output: json.RawMessage(`{"ok":true}`)}
}

func okFinish(task *host.TaskRecord) host.FinishInput {
	return host.FinishInput{Record: attemptOf(task), Claimed: task, Outcome: host.TaskOutcome{MachineStatus: host.MachineOK, OperatorSummary: "done"}}
}

func wantErr(t testing.TB, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v, want %v", err, kind)
	}
}

// verify fails t unless the chain verifies.
func verify(t testing.TB, s interface {
	VerifyChain(context.Context) (*host.ChainReport, error)
}) *host.ChainReport {
	t.Helper()
	rep, err := s.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK {
		t.Fatalf("chain broken: %+v", rep.Broken)
	}
	return rep
}

// events lists every event of the store, in chain order.
func events(t testing.TB, s *Store, f host.EventFilter) []*host.Event {
	t.Helper()
	f.Limit = 100000
	evs, err := s.Events(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// tamper runs a statement as the superuser with the append-only triggers
// off, as someone editing the database behind packrun's back would.
func tamper(t testing.TB, s *Store, sql string, args ...any) {
	t.Helper()
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err == nil && tag.RowsAffected() != 1 {
			err = errors.New("tamper: " + tag.String())
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
