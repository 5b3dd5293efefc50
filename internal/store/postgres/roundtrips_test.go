package postgres

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// flightTracer records what each network round trip of the pool's
// connections made on a context of traced carried: one statement (Query,
// QueryRow, Exec) or the statements of one pipeline (SendBatch). The
// store's own background work (the evidence log's sequencer) runs on
// other contexts.
type flightTracer struct {
	mu      sync.Mutex
	flights [][]string
	batches map[*pgx.Conn]int // the flight a connection's open batch fills
}

var (
	_ pgx.QueryTracer = (*flightTracer)(nil)
	_ pgx.BatchTracer = (*flightTracer)(nil)
)

// traceKey marks a context whose round trips flightTracer records.
type traceKey struct{}

// traced is the context of the operations a test counts the round trips
// of.
var traced = context.WithValue(context.Background(), traceKey{}, true)

func (f *flightTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if ctx.Value(traceKey{}) == nil {
		return ctx
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flights = append(f.flights, []string{d.SQL})
	return ctx
}

func (*flightTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (f *flightTracer) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if ctx.Value(traceKey{}) == nil {
		return ctx
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.batches == nil {
		f.batches = map[*pgx.Conn]int{}
	}
	f.batches[c] = len(f.flights)
	f.flights = append(f.flights, nil)
	return ctx
}

func (f *flightTracer) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i, ok := f.batches[c]; ok {
		f.flights[i] = append(f.flights[i], d.SQL)
	}
}

func (f *flightTracer) TraceBatchEnd(_ context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.batches, c)
}

// during returns the flights sent while fn ran whose statements contain
// one of the texts (all of them when none is given).
func (f *flightTracer) during(fn func(), texts ...string) [][]string {
	f.mu.Lock()
	start := len(f.flights)
	f.mu.Unlock()
	fn()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]string
	for _, fl := range f.flights[start:] {
		if len(texts) == 0 || slices.ContainsFunc(fl, func(sql string) bool {
			return slices.ContainsFunc(texts, func(t string) bool { return strings.Contains(sql, t) })
		}) {
			out = append(out, fl)
		}
	}
	return out
}

// tracedStore opens a store whose round trips tr records.
func tracedStore(t *testing.T, tr *flightTracer) *Store {
	t.Helper()
	s, err := Open(ctx, pgtest.DSN(t), Options{LeaseTTL: 10 * time.Second, tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A settlement sends the task's UPDATE and its attempt's artifacts
// verified in one round trip.
func TestSettleOneRoundTripForItsWrites(t *testing.T) {
	tr := &flightTracer{}
	s := tracedStore(t, tr)
	mustEnqueue(t, s, intent("t", 0))
	task := mustClaim(t, s, "r1")
	var err error
	flights := tr.during(func() { _, err = s.Finish(traced, task.TaskID, okFinish(task)) }, "UPDATE tasks SET status", "UPDATE artifacts")
	if err != nil {
		t.Fatal(err)
	}
	if len(flights) != 1 {
		t.Fatalf("the settlement's writes took %d round trips, want 1: %q", len(flights), flights)
	}
}

// What a dispatcher reads to start a task (route, spec, agents) is one
// round trip.
func TestTaskSetupOneRoundTrip(t *testing.T) {
	tr := &flightTracer{}
	s := tracedStore(t, tr)
	if err := s.SetPackTaskTypes(ctx, "local.a", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "t"}, Node: "n"}}); err != nil {
		t.Fatal(err)
	}
	var setup *host.TaskSetup
	var err error
	flights := tr.during(func() { setup, err = s.TaskSetup(traced, "t") })
	if err != nil || setup.RouteErr != nil || setup.Route.Pack != "local.a" {
		t.Fatalf("%+v %v", setup, err)
	}
	if len(flights) != 1 {
		t.Fatalf("TaskSetup took %d round trips, want 1: %q", len(flights), flights)
	}
	// Read again with nothing changed: none; after this node changed the
	// route: one, and the new route.
	if flights := tr.during(func() { setup, err = s.TaskSetup(traced, "t") }); err != nil || len(flights) != 0 || setup.Route.Pack != "local.a" {
		t.Fatalf("TaskSetup again took %d round trips (%+v, %v), want 0", len(flights), setup, err)
	}
	if err := s.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "t"}, Pack: "local.b", Node: "n"}); err != nil {
		t.Fatal(err)
	}
	if flights := tr.during(func() { setup, err = s.TaskSetup(traced, "t") }); err != nil || len(flights) != 1 || setup.Route.Pack != "local.b" {
		t.Fatalf("TaskSetup after an override took %d round trips (%+v, %v), want 1 and the override", len(flights), setup, err)
	}
}

// An append on a node alone is two round trips, its BEGIN and COMMIT
// riding with its statements (lazyTx): the lock and the head, then the
// entry and the commit.
func TestAppendTwoRoundTrips(t *testing.T) {
	tr := &flightTracer{}
	s := tracedStore(t, tr)
	var err error
	flights := tr.during(func() {
		_, err = s.AppendEvent(traced, host.Event{Type: "test_event", Data: []byte(`{"n":1}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(flights) != 2 {
		t.Fatalf("the append took %d round trips, want 2: %q", len(flights), flights)
	}
	first, last := flights[0], flights[1]
	if first[0] != "BEGIN" || !strings.Contains(strings.Join(first, ";"), "pg_try_advisory_xact_lock") {
		t.Fatalf("first round trip %q, want the BEGIN with the lock", first)
	}
	if last[len(last)-1] != "COMMIT" || !strings.Contains(strings.Join(last, ";"), "INSERT INTO runtime_events") {
		t.Fatalf("last round trip %q, want the entry with the COMMIT", last)
	}
	if rep := verify(t, s); rep.HeadSeq != 1 {
		t.Fatalf("report %+v", rep)
	}
}

// A transaction that sends nothing costs no round trip; one whose
// statement fails is rolled back, and its connection goes back to the
// pool outside any transaction.
func TestLazyTransactionEnds(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	ltx, err := begin(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := ltx.commitWith(ctx, nil); err != nil || ltx.begun {
		t.Fatalf("an empty transaction: %v (begun %v)", err, ltx.begun)
	}
	ltx, err = begin(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	x := &tx{Tx: ltx, s: s, ctx: ctx}
	if _, err := x.Exec(ctx, `INSERT INTO kv_missing_table VALUES (1)`); err == nil {
		t.Fatal("a statement on a missing table ran")
	}
	if _, err := x.Exec(ctx, `SELECT 1`); err == nil {
		t.Fatal("a statement ran after the BEGIN's pipeline failed")
	}
	var b pgx.Batch
	b.Queue(`SELECT 1`)
	if err := ltx.commitWith(ctx, &b); err == nil {
		t.Fatal("a failed transaction committed")
	}
	// Every connection of the pool is outside a transaction.
	for range 4 {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st := c.Conn().PgConn().TxStatus(); st != 'I' {
			t.Fatalf("a pooled connection in transaction state %q", st)
		}
		defer c.Release()
	}
}
