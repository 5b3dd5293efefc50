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

// awaitNoPending waits until no entry is pending, or fails saying what
// never happened.
func awaitNoPending(t *testing.T, s *Store, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for pendingRows(t, s) > 0 {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdChainLock takes ChainLock in a session of its own, as a link pass
// or a writer placing its entries on another node would hold it, until
// release is called (or the test ends): writes meanwhile go pending.
func holdChainLock(t *testing.T, s *Store) (release func()) {
	t.Helper()
	holder, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(ctx) })
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, ChainLock); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ChainLock); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An append commits without the chain lock: with the lock held by
// another session, a node's event and attempt are durable (their rows
// committed, pending), and they get their places once it is released.
func TestAppendCommitsWithoutTheChainLock(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	release := holdChainLock(t, s)
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
	release()
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

// A writer that finds the chain lock free places its entries itself:
// they are inserted in their places (no pend: never pending, never
// rewritten by a pass), in order after what was there, and handed back
// with the seqs and hashes they are stored with.
func TestFreeLockPlacesEntriesAtOnce(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	a := &host.Attempt{Node: "n", Outcome: abi.Completed, Output: json.RawMessage(`{"i":1}`)}
	if err := s.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if e.Seq != 1 || a.EventSeq != 2 {
		t.Fatalf("places: event %d, attempt %d; want 1 and 2", e.Seq, a.EventSeq)
	}
	var placed int
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM runtime_events WHERE seq = 1 AND pend IS NULL AND hash = $1)
		+ (SELECT count(*) FROM attempt_records WHERE seq = 2 AND pend IS NULL AND prev_hash = $1)`, e.Hash).Scan(&placed); err != nil {
		t.Fatal(err)
	}
	if placed != 2 {
		t.Fatalf("%d of the 2 entries stored in their places by their writer, with the hashes handed back", placed)
	}
	if rep := verify(t, s); rep.HeadSeq != 2 {
		t.Fatalf("report %+v", rep)
	}
	if err := s.VerifyAttempt(ctx, a.AttemptID); err != nil {
		t.Fatal(err)
	}
}

// A node that hears another node write the chain leaves placing to the
// link passes: its writers no longer try the lock, and their entries
// are linked from pending.
func TestNodesSharingTheChainLeavePlacingToPasses(t *testing.T) {
	ns := nodes(t, 2, nil)
	a, b := ns[0], ns[1]
	if !b.link.alone() {
		t.Fatal("a node that has heard of no other counts itself shared")
	}
	// Node b's listener may not be listening yet when a's first commit
	// notifies (a node hears what is written after its LISTEN), so a
	// writes until b has heard it.
	var first *host.Event
	deadline := time.Now().Add(20 * time.Second)
	for b.link.alone() {
		if time.Now().After(deadline) {
			t.Fatal("node b never heard that node a placed an entry")
		}
		var err error
		if first, err = a.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !a.link.alone() {
		t.Fatal("node a counts its own notification as another node's")
	}
	second, err := b.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if second.Seq <= first.Seq {
		t.Fatalf("places %d then %d", first.Seq, second.Seq)
	}
	var pend *int64
	if err := b.pool.QueryRow(ctx, `SELECT pend FROM runtime_events WHERE seq = $1`, second.Seq).Scan(&pend); err != nil {
		t.Fatal(err)
	}
	if pend == nil {
		t.Fatal("node b placed its entry itself while sharing the chain; want it linked by a pass")
	}
	verify(t, b)
}

// Entries a node committed but never linked (it died between its commit
// and its link pass) are linked by another node's pass, messages' and
// artifacts' rows with them, and the chain verifies.
func TestPendingEntriesLinkedByAnotherNode(t *testing.T) {
	ns := nodes(t, 2, nil)
	dead, live := ns[0], ns[1]
	dead.link.close()                 // no pass on this node from now on
	release := holdChainLock(t, dead) // and no place given by its writers
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
	release()
	awaitNoPending(t, live, "the live node's poll never linked the dead node's entries")
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
	release := holdChainLock(t, s)
	if _, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":2}`)}); err != nil {
		t.Fatal(err)
	}
	release()
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
	// Held while the append commits, so that its entry goes pending
	// behind the bad one rather than being placed by its writer.
	release := holdChainLock(t, s)
	type result struct {
		e   *host.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
		done <- result{e, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for pendingRows(t, s) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the append never committed its entry pending")
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.e.Seq != 0 {
		t.Fatalf("an entry behind an unlinkable one came back at %d, want 0 (not placed)", r.e.Seq)
	}
	if _, err := s.LogSync(ctx); err == nil || !strings.Contains(err.Error(), "pending event 999999999") || !strings.Contains(err.Error(), "not a time") {
		t.Fatalf("LogSync: %v, want it to name pending event 999999999 and its time", err)
	}
}

// A writer that finds the chain lock taken while this node's other
// writer places its entries waits for that commit and places its own,
// instead of leaving them pending for a pass.
func TestWriterWaitsForItsNodesOtherWriter(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	holder, err := pgx.Connect(ctx, s.pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, ChainLock); err != nil {
		t.Fatal(err)
	}
	s.link.placing.Add(1) // as this node's other writer does while it holds the lock
	released := make(chan error, 1)
	go func() {
		time.Sleep(200 * time.Millisecond)
		s.link.placing.Add(-1)
		_, err := holder.Exec(ctx, `SELECT pg_advisory_unlock($1)`, ChainLock)
		released <- err
	}()
	e, err := s.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	var pend *int64
	if err := s.pool.QueryRow(ctx, `SELECT pend FROM runtime_events WHERE seq = $1`, e.Seq).Scan(&pend); err != nil {
		t.Fatalf("event %d: %v", e.Seq, err)
	}
	if e.Seq != 1 || pend != nil {
		t.Fatalf("event at %d, pend %v: want placed by its writer at 1", e.Seq, pend)
	}
	if s.link.placing.Load() != 0 {
		t.Fatalf("%d writers still counted placing after their commits", s.link.placing.Load())
	}
	verify(t, s)
}

// An idle node's poll for entries a crashed writer left pending reads
// each table's lowest seq from its primary key: it says so while one is
// pending and not after, and never scans a table (the EXISTS it replaced
// was planned as a sequential scan of a young table, read whole every
// 50 ms to find nothing).
func TestIdlePollReadsTheIndex(t *testing.T) {
	ns := nodes(t, 2, nil)
	dead, live := ns[0], ns[1]
	for i := range 3000 {
		if _, err := live.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	anyPending := func() bool {
		t.Helper()
		var any bool
		if err := live.pool.QueryRow(ctx, anyPendingQuery).Scan(&any); err != nil {
			t.Fatal(err)
		}
		return any
	}
	if anyPending() {
		t.Fatal("pending entries reported where none is")
	}
	dead.link.close()
	release := holdChainLock(t, dead)
	if _, err := dead.AppendEvent(ctx, host.Event{Type: "test_event", Data: json.RawMessage(`{"n":-1}`)}); err != nil {
		t.Fatal(err)
	}
	if !anyPending() {
		t.Fatal("an entry left pending is not reported")
	}
	release()
	awaitNoPending(t, live, "the pending entry was never linked")
	if anyPending() {
		t.Fatal("pending entries reported after every entry was linked")
	}
	rows, err := live.pool.Query(ctx, "EXPLAIN "+anyPendingQuery)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	rows.Close()
	if p := strings.Join(plan, "\n"); strings.Contains(p, "Seq Scan") || !strings.Contains(p, "runtime_events_pkey") {
		t.Fatalf("the poll's plan scans a table:\n%s", p)
	}
}
