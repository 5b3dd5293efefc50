package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// pendingRows counts the chain rows written but not linked yet.
func pendingRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runtime_events WHERE seq < 0) + (SELECT count(*) FROM attempt_records WHERE seq < 0)`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An append commits without the chain lock: with the lock held by
// another session, a node's event and attempt are durable (their rows
// committed, pending), and they get their places once it is released.
func TestAppendCommitsWithoutTheChainLock(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	holder, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, ChainLock); err != nil {
		t.Fatal(err)
	}
	type result struct {
		e   *host.Event
		a   *host.Attempt
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
		a := &host.Attempt{Node: "n", Outcome: abi.Completed, Output: json.RawMessage(`{"i":1}`)}
		if err == nil {
			err = s.RecordAttempt(ctx, a)
		}
		done <- result{e, a, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for pendingRows(t, s) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no entry was committed while another session held the chain lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("the append returned before its entry was linked: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ChainLock); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.e.Seq != 1 || r.a.EventSeq != 2 || r.e.Hash == "" {
		t.Fatalf("linked places: event %d (hash %q), attempt %d; want 1 and 2", r.e.Seq, r.e.Hash, r.a.EventSeq)
	}
	if n := pendingRows(t, s); n != 0 {
		t.Fatalf("%d rows still pending", n)
	}
	rep := verify(t, s)
	if rep.HeadSeq != 2 || rep.Events != 2 || rep.Attempts != 1 {
		t.Fatalf("report %+v", rep)
	}
	got, err := s.Events(ctx, host.EventFilter{})
	if err != nil || len(got) != 2 || got[0].Hash != r.e.Hash {
		t.Fatalf("events %+v (%v); want the appended one first, hash %s", got, err, r.e.Hash)
	}
}

// Entries a node committed but never linked (it died between its commit
// and its link pass) are linked by another node's pass, messages' and
// artifacts' rows with them, and the chain verifies.
func TestPendingEntriesLinkedByAnotherNode(t *testing.T) {
	ns := nodes(t, 2, nil)
	dead, live := ns[0], ns[1]
	dead.link.close() // no pass on this node from now on
	e, err := dead.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 0 {
		t.Fatalf("an entry no pass linked came back with seq %d, want 0", e.Seq)
	}
	a := &host.Attempt{Node: "n", Outcome: abi.Completed, Output: json.RawMessage(`{"i":1}`)}
	if err := dead.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for pendingRows(t, live) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the live node's poll never linked the dead node's entries")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rep := verify(t, live)
	if rep.HeadSeq != 2 {
		t.Fatalf("report %+v", rep)
	}
	got, err := live.Attempt(ctx, a.AttemptID)
	if err != nil || got.EventSeq != 2 {
		t.Fatalf("attempt %+v (%v), want it at place 2", got, err)
	}
	if err := live.VerifyAttempt(ctx, a.AttemptID); err != nil {
		t.Fatal(err)
	}
}

// Nodes append at once: every seq a writer is handed back is the place
// its entry holds in the chain (whichever node's pass linked it), each
// once.
func TestReturnedSeqsAreTheChains(t *testing.T) {
	ns := nodes(t, 3, nil)
	const each = 30
	var (
		mu   sync.Mutex
		seqs = map[int64]string{}
		wg   sync.WaitGroup
	)
	errs := make(chan error, len(ns))
	for i, s := range ns {
		wg.Go(func() {
			for j := range each {
				e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(fmt.Sprintf(`{"node":%d,"j":%d}`, i, j))})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if prev, dup := seqs[e.Seq]; dup || e.Seq <= 0 {
					errs <- fmt.Errorf("seq %d handed back twice or not placed (%s, %s)", e.Seq, prev, e.Data)
				}
				seqs[e.Seq] = e.Hash
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stored, err := ns[0].Events(ctx, host.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(ns)*each {
		t.Fatalf("%d events stored, want %d", len(stored), len(ns)*each)
	}
	for _, e := range stored {
		if seqs[e.Seq] != e.Hash {
			t.Fatalf("event %d: stored hash %s, handed back %s", e.Seq, e.Hash, seqs[e.Seq])
		}
	}
	verify(t, ns[2])
}

// The append-only triggers let a row move once, from pending to its
// place, with nothing else changed: a pending row's content, a linked
// row moved back to pending, or a linked row's place, are refused.
func TestLinkIsTheOnlyUpdate(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	if _, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	s.link.close()
	if _, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	if n := pendingRows(t, s); n != 1 {
		t.Fatalf("%d rows pending, want 1", n)
	}
	for _, q := range []string{
		`UPDATE runtime_events SET seq = 7, data = '{"n":3}' WHERE seq < 0`,
		`UPDATE runtime_events SET seq = 7, time = '2020-01-01T00:00:00Z' WHERE seq < 0`,
		`UPDATE runtime_events SET data = '{"n":3}' WHERE seq < 0`,
		`UPDATE runtime_events SET seq = -seq WHERE seq = 1`,
		`UPDATE runtime_events SET seq = 9 WHERE seq = 1`,
		`DELETE FROM runtime_events WHERE seq < 0`,
	} {
		if _, err := s.pool.Exec(ctx, q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want it refused", q, err)
		}
	}
	if _, err := s.pool.Exec(ctx, `UPDATE runtime_events SET seq = 2, prev_hash = 'p', hash = 'h' WHERE seq < 0`); err != nil {
		t.Fatalf("the link itself was refused: %v", err)
	}
}

// A pending entry that cannot be linked (its time does not read: written
// behind the store's back) stops every link, and says so: the
// writer is answered with no place rather than kept waiting, and
// LogSync names the entry.
func TestUnlinkableEntryIsReported(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	if _, err := s.pool.Exec(ctx, `INSERT INTO runtime_events (seq, time, type, task_id, attempt_id, data, prev_hash, hash, tenant, pend)
		VALUES (-999999999, 'not a time', 'x', '', '', '{}', '', '', '', 999999999)`); err != nil {
		t.Fatal(err)
	}
	e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq != 0 {
		t.Fatalf("an entry behind an unlinkable one came back at %d, want 0 (not placed)", e.Seq)
	}
	if _, err := s.LogSync(ctx); err == nil || !strings.Contains(err.Error(), "pending event 999999999") || !strings.Contains(err.Error(), "not a time") {
		t.Fatalf("LogSync: %v, want it to name pending event 999999999 and its time", err)
	}
}
