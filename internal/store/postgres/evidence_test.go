package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// Nodes append events and record attempts concurrently, each in
// transactions of their own: the entries form one chain, seqs 1..n
// without a gap, and VerifyChain accepts it.
func TestChainConcurrentAppends(t *testing.T) {
	const workers, each = 6, 40
	ns := nodes(t, 3, nil)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		s := ns[w%len(ns)]
		wg.Go(func() {
			for i := range each {
				var err error
				if i%2 == 0 {
					_, err = s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))})
				} else {
					err = s.RecordAttempt(ctx, &host.Attempt{Node: "n", Outcome: abi.Completed, Output: json.RawMessage(`{"i":1}`)})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	rep := verify(t, ns[1])
	if rep.Events != workers*each || rep.HeadSeq != workers*each || rep.Attempts != workers*each/2 {
		t.Fatalf("report %+v", rep)
	}
	evs := events(t, ns[0], host.EventFilter{})
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if i > 0 && e.PrevHash != evs[i-1].Hash {
			t.Fatalf("event %d does not link its predecessor", e.Seq)
		}
	}
}

// chainStore is the part of host.Evidence both stores implement.
type chainStore interface {
	AppendEvent(context.Context, host.Event) (*host.Event, error)
	RecordAttempt(context.Context, *host.Attempt) error
	VerifyChain(context.Context) (*host.ChainReport, error)
}

// The same operations at the same times give the same chain, hash for
// hash, on PostgreSQL and SQLite: both link entries as internal/evidence
// hashes them.
func TestChainMatchesSQLite(t *testing.T) {
	clk := newClock()
	pg := nodes(t, 1, clk)[0]
	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "packrun.db"), sqlite.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	ops := []func(chainStore) error{
		func(e chainStore) error {
			_, err := e.AppendEvent(ctx, host.Event{Type: "first", TaskID: "task-1", Data: json.RawMessage(`{"b": 2, "a": [1, 2]}`)})
			return err
		},
		func(e chainStore) error {
			return e.RecordAttempt(ctx, &host.Attempt{AttemptID: "att-1", TaskID: "task-1", Attempt: 1, Pack: "p@1.0.0", Node: "n",
				Outcome: abi.Failed, Input: json.RawMessage(`{"x": 1}`), Stdout: []byte("out"), StartedAt: clk.Now(), EndedAt: clk.Now().Add(time.Second)})
		},
		func(e chainStore) error {
			_, err := e.AppendEvent(ctx, host.Event{Type: "second", AttemptID: "att-1"})
			return err
		},
	}
	for i, op := range ops {
		clk.Add(time.Millisecond)
		if err := op(pg); err != nil {
			t.Fatalf("op %d on postgres: %v", i, err)
		}
		if err := op(lite); err != nil {
			t.Fatalf("op %d on sqlite: %v", i, err)
		}
	}
	got := events(t, pg, host.EventFilter{})
	want, err := lite.Events(ctx, host.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !reflect.DeepEqual(got, want) {
		for i := range max(len(got), len(want)) {
			if i < len(got) && i < len(want) {
				t.Logf("%d: pg %+v\n   sqlite %+v", i, got[i], want[i])
			}
		}
		t.Fatal("the chains differ")
	}
	pgRep, liteRep := verify(t, pg), verify(t, lite)
	if pgRep.Head != liteRep.Head || pgRep.HeadSeq != liteRep.HeadSeq {
		t.Fatalf("heads differ: %+v %+v", pgRep, liteRep)
	}
}

// Edits behind packrun's back are found: a changed event, a removed one,
// a changed attempt record, an attempt inserted at an event's place.
func TestTamperingDetected(t *testing.T) {
	build := func(t *testing.T) (*Store, []*host.Event) {
		s := nodes(t, 1, nil)[0]
		for i := range 3 {
			if _, err := s.AppendEvent(ctx, host.Event{Type: "e", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
				t.Fatal(err)
			}
			if err := s.RecordAttempt(ctx, &host.Attempt{AttemptID: fmt.Sprintf("att-%d", i), Node: "n", Outcome: abi.Completed}); err != nil {
				t.Fatal(err)
			}
		}
		verify(t, s)
		return s, events(t, s, host.EventFilter{})
	}
	broken := func(t *testing.T, s *Store, seq int64, problem string) {
		t.Helper()
		rep, err := s.VerifyChain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Broken.Problem != problem || rep.Broken.Seq != seq {
			t.Fatalf("report %+v %+v, want %s at %d", rep, rep.Broken, problem, seq)
		}
	}
	t.Run("event changed", func(t *testing.T) {
		s, _ := build(t)
		tamper(t, s, `UPDATE runtime_events SET data = '{"i":9}' WHERE seq = 3`)
		broken(t, s, 3, host.BreakEventHash)
	})
	t.Run("event removed", func(t *testing.T) {
		s, _ := build(t)
		tamper(t, s, `DELETE FROM runtime_events WHERE seq = 3`)
		broken(t, s, 4, host.BreakSeqGap)
	})
	t.Run("event relinked", func(t *testing.T) {
		s, evs := build(t)
		tamper(t, s, `UPDATE runtime_events SET prev_hash = $1 WHERE seq = 5`, evs[0].Hash)
		broken(t, s, 5, host.BreakPrevHash)
	})
	t.Run("attempt changed", func(t *testing.T) {
		s, _ := build(t)
		tamper(t, s, `UPDATE attempt_records SET record = set_byte(record, length(record) - 1, (get_byte(record, length(record) - 1) + 1) % 256) WHERE attempt_id = 'att-1'`)
		broken(t, s, 4, host.BreakAttemptHash)
		wantErr(t, s.VerifyAttempt(ctx, "att-1"), host.ErrTampered)
		if err := s.VerifyAttempt(ctx, "att-2"); err != nil {
			t.Fatalf("an untouched attempt: %v", err)
		}
	})
	t.Run("attempt inserted", func(t *testing.T) {
		s, _ := build(t)
		tamper(t, s, `INSERT INTO attempt_records SELECT 3, 'att-x', task_id, attempt, tenant, pack, started_at, record, prev_hash, hash FROM attempt_records WHERE attempt_id = 'att-0'`)
		broken(t, s, 3, host.BreakAttemptUnchain)
	})
	t.Run("refused without the superuser's help", func(t *testing.T) {
		s, _ := build(t)
		if _, err := s.pool.Exec(ctx, `UPDATE runtime_events SET data = '{}' WHERE seq = 1`); err == nil {
			t.Fatal("runtime_events accepted an UPDATE")
		}
		if _, err := s.pool.Exec(ctx, `DELETE FROM attempt_records`); err == nil {
			t.Fatal("attempt_records accepted a DELETE")
		}
	})
}

// Nodes starting at once each apply the migrations once between them.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(ctx, dsn, Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var n, max int
	if err := s2.pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || max != len(migrations) {
		t.Fatalf("%d migrations recorded (newest %d), want %d", n, max, len(migrations))
	}
	if err := s2.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// Operations sharing a transaction (writer.go) keep their own outcomes: a
// failing one changes nothing, an attempt id recorded twice at once is
// recorded once, and the chain holds exactly the others' entries.
func TestBatchedOperationsKeepTheirOutcomes(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	const n = 60
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			switch i % 3 {
			case 0:
				_, errs[i] = s.AppendEvent(ctx, host.Event{Type: "ok", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			case 1:
				_, errs[i] = s.Cancel(ctx, "task-missing")
			case 2:
				errs[i] = s.RecordAttempt(ctx, &host.Attempt{AttemptID: "att-same", Node: "n", Outcome: abi.Completed,
					StartedAt: time.Unix(1, 0), EndedAt: time.Unix(2, 0)})
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%3 == 1 {
			wantErr(t, err, host.ErrNotFound)
		} else if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	rep := verify(t, s)
	if rep.Events != n/3+1 || rep.Attempts != 1 {
		t.Fatalf("report %+v: want %d events, one of them the attempt", rep, n/3+1)
	}
	// A different record under the same id is refused.
	err := s.RecordAttempt(ctx, &host.Attempt{AttemptID: "att-same", Node: "other", Outcome: abi.Completed})
	wantErr(t, err, host.ErrConflict)
}
