package sqlite

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// The walk reads rows from the driver directly; its conversions are
// database/sql's for the destinations the chain's scans use.
func TestDriverRowScan(t *testing.T) {
	var n int64
	var s string
	var b []byte
	rec := []byte{1, 2}
	if err := (driverRow{int64(7), "x", rec}).Scan(&n, &s, &b); err != nil || n != 7 || s != "x" || &b[0] != &rec[0] {
		t.Fatalf("plain: %v %d %q %v", err, n, s, b)
	}
	if err := (driverRow{"12", []byte("y"), "text"}).Scan(&n, &s, &b); err != nil || n != 12 || s != "y" || string(b) != "text" {
		t.Fatalf("converted: %v %d %q %q", err, n, s, b)
	}
	if err := (driverRow{[]byte("3"), int64(5), nil}).Scan(&n, &s, &b); err != nil || n != 3 || s != "5" || b != nil {
		t.Fatalf("converted: %v %d %q %v", err, n, s, b)
	}
	if err := (driverRow{float64(1.5), 2.5}).Scan(&s, &b); err != nil || s != "1.5" || string(b) != "2.5" {
		t.Fatalf("floats: %v %q %q", err, s, b)
	}
	for _, bad := range []driverRow{{nil}, {"x"}, {1.5}} {
		if err := bad.Scan(&n); err == nil {
			t.Errorf("%#v into int64: no error", bad)
		}
	}
	if err := (driverRow{nil}).Scan(&s); err == nil {
		t.Error("NULL into string: no error")
	}
	if err := (driverRow{int64(1)}).Scan(&n, &s); err == nil {
		t.Error("two destinations for one column: no error")
	}
	var f float64
	if err := (driverRow{int64(1)}).Scan(&f); err == nil {
		t.Error("a destination the walk does not use: no error")
	}
}

// A record rewritten as text (SQLite keeps what it is given in a BLOB
// column) is a broken attempt, not an error of the walk.
func TestVerifyChainRecordAsText(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	tamper(t, f, `UPDATE attempt_records SET record = 'not a record'`)
	rep, err := f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.Problem != host.BreakAttemptHash || rep.Broken.AttemptID != a.AttemptID || !errors.Is(rep.Broken, host.ErrTampered) {
		t.Fatalf("report %+v, broken %+v", rep, rep.Broken)
	}
}

// The walk reads an attempt's text columns joined with NUL bytes
// (attemptWalkColumns). One whose columns hold a NUL themselves is read
// again column by column: stored as recorded, it verifies; a NUL written
// into a column behind the store's back is a broken attempt, named.
func TestVerifyChainTextColumnsHoldingNUL(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	a := &host.Attempt{AttemptID: "att-nul", Pack: "local.p\x00q@1.0.0", Node: "demo.node", Tenant: "acme", Attempt: 1,
		Outcome: abi.Completed, Output: json.RawMessage(`{}`)}
	if err := f.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := f.db.QueryRow(`SELECT pack FROM attempt_records WHERE attempt_id = 'att-nul'`).Scan(&stored); err != nil || stored != a.Pack {
		t.Fatalf("pack stored as %q (%v), want %q", stored, err, a.Pack)
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Attempts != 2 {
		t.Fatalf("report %+v (%v), broken %+v; want both attempts verified", rep, err, rep.Broken)
	}
	tamper(t, f, `UPDATE attempt_records SET tenant = 'ac' || char(0) || 'me' WHERE attempt_id = 'att-1'`)
	rep, err = f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK || rep.Broken == nil || rep.Broken.AttemptID != "att-1" || rep.Broken.Problem != host.BreakAttemptHash {
		t.Fatalf("report %+v, broken %+v; want att-1 broken", rep, rep.Broken)
	}
}

// The writer starts a transaction from the head its last commit left
// only while no other connection has committed (PRAGMA data_version):
// two stores on one database, as two processes, appending in turn, each
// append right after the other's, keep one unbroken chain.
func TestChainHeadAcrossStores(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	const rounds = 50
	for i := range rounds {
		for j, s := range []*Store{f.Store, other} {
			e, err := s.AppendEvent(ctx, host.Event{Type: "test.turn", Data: json.RawMessage(`{"round":1}`)})
			if err != nil {
				t.Fatalf("round %d, store %d: %v", i, j, err)
			}
			if want := int64(2*i + j + 1); e.Seq != want {
				t.Fatalf("round %d, store %d: seq %d, want %d", i, j, e.Seq, want)
			}
		}
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK || rep.Events != 2*rounds {
		t.Fatalf("chain: %+v %v (broken %+v)", rep, err, rep.Broken)
	}
}
