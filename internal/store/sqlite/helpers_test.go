package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

var ctx = context.Background()

// clock is an injectable clock.
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

type fixture struct {
	*Store
	path  string
	clock *clock
}

func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "packrun.db")
	c := newClock()
	if opts.Now == nil {
		opts.Now = c.Now
	}
	s, err := Open(ctx, path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{Store: s, path: path, clock: c}
}

// another opens a second Store on the fixture's database with its clock,
// as another process would, closed when the test ends.
func (f *fixture) another(t testing.TB) *Store {
	t.Helper()
	s, err := Open(ctx, f.path, Options{Now: f.opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func intent(taskType string, prio *int) host.TaskIntent {
	return host.TaskIntent{TaskType: taskType, Source: "test", Priority: prio, Payload: json.RawMessage(`{"n":1}`)}
}

func mustEnqueue(t testing.TB, s *Store, in host.TaskIntent, opts host.EnqueueOptions) *host.TaskRecord {
	t.Helper()
	rec, err := s.Enqueue(ctx, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func mustClaim(t testing.TB, s *Store, now time.Time) *host.TaskRecord {
	t.Helper()
	rec, err := s.Claim(ctx, "runner-1", now)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// attemptFor records an attempt of a claimed task.
func attemptFor(t testing.TB, s *Store, task *host.TaskRecord) *host.Attempt {
	t.Helper()
	a := &host.Attempt{
		TaskID: task.TaskID, Pack: "local.test@1.0.0", ModuleSHA256: "ab12", Node: "test.node", RunID: "run-" + task.TaskID,
		Attempt: task.AttemptCount, ABIVersion: "1.0", Input: task.Payload, Output: json.RawMessage(`{"ok":true}`),
		Outcome: abi.Completed, Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`),
	}
	if err := s.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	return a
}

func okOutcome() host.TaskOutcome {
	return host.TaskOutcome{MachineStatus: host.MachineOK, OperatorSummary: "done"}
}

func wantErr(t testing.TB, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v, want %v", err, kind)
	}
}

func eventTypes(t testing.TB, s *Store, taskID string) []string {
	t.Helper()
	evs, err := s.Events(ctx, host.EventFilter{TaskID: taskID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}
