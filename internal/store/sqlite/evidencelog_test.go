package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/store/storetest"
)

func appendNotes(t *testing.T, f *fixture, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := f.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// The committed v5 store's chain becomes the first entries of the log
// when it is opened: the root is the tree of its chain hashes, and the
// leaf at the old head's index is the old head.
func TestEvidenceLogMigratesV5Store(t *testing.T) {
	f := openV5(t, nil)
	if cp, err := f.LogCheckpoint(ctx, 0); err != nil || cp.Size != v5HeadSeq {
		t.Fatalf("log as the v5 store opened: %+v %v", cp, err)
	}
	hashes := storetest.ChainHashes(t, f.Store)
	if len(hashes) != v5HeadSeq || hashes[v5HeadSeq-1] != v5Head {
		t.Fatalf("v5 chain: %d entries", len(hashes))
	}
	cp := storetest.CheckLog(t, f.Store, hashes, nil)
	if cp.Size != v5HeadSeq {
		t.Fatalf("log size %d after opening the v5 store, want %d", cp.Size, v5HeadSeq)
	}
	// Entries appended after go on from there.
	appendNotes(t, f, "after", 3)
	storetest.CheckLog(t, f.Store, storetest.ChainHashes(t, f.Store), []uint64{v5HeadSeq})
}

// A store made before the log (its migration not applied) has its whole
// chain integrated when it is opened.
func TestEvidenceLogMigratesStoreWithoutLog(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	appendNotes(t, f, "old", 20)
	f.Close()
	d, err := sql.Open("sqlite3", f.path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE evidence_tiles`, `DROP TABLE evidence_log`, `DROP TABLE evidence_checkpoints`,
		`DELETE FROM schema_migrations WHERE component = 'host' AND version >= 19`} {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	d.Close()
	f = reopen(t, f)
	hashes := storetest.ChainHashes(t, f.Store)
	if cp, err := f.LogCheckpoint(ctx, 0); err != nil || cp.Size != uint64(len(hashes)) {
		t.Fatalf("log as the store opened: %+v %v; the chain has %d entries", cp, err, len(hashes))
	}
	if cp := storetest.CheckLog(t, f.Store, hashes, nil); cp.Size != uint64(len(hashes)) || len(hashes) < 20 {
		t.Fatalf("log size %d, chain %d", cp.Size, len(hashes))
	}
}

// A store that stopped with entries durable but not integrated (a crash
// between the two) keeps what it integrated and integrates the rest when
// it is opened again.
func TestEvidenceLogIntegratesPendingAfterCrash(t *testing.T) {
	f := newFixture(t, Options{})
	appendNotes(t, f, "a", 5)
	cp, err := f.LogSync(ctx)
	if err != nil || cp.Size != 5 {
		t.Fatalf("LogSync: %+v %v", cp, err)
	}
	f.logSeq.Close() // the sequencer is gone: what follows stays pending
	appendNotes(t, f, "b", 7)
	if now, err := f.LogCheckpoint(ctx, 0); err != nil || now.Size != 5 {
		t.Fatalf("log after the sequencer stopped: %+v %v", now, err)
	}
	f = reopen(t, f)
	if now, err := f.LogCheckpoint(ctx, 0); err != nil || now.Size != 12 {
		t.Fatalf("log as the store opened again: %+v %v", now, err)
	}
	hashes := storetest.ChainHashes(t, f.Store)
	if got := storetest.CheckLog(t, f.Store, hashes, []uint64{5}); got.Size != 12 {
		t.Fatalf("log size %d after reopening, want 12", got.Size)
	}
}

// The log's tables are append-only: a tile is never narrowed or
// rewritten, the log never shrinks, a checkpoint never changes.
func TestEvidenceLogTablesAppendOnly(t *testing.T) {
	f := newFixture(t, Options{})
	appendNotes(t, f, "a", 3)
	if _, err := f.LogSync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE evidence_tiles SET width = 1, data = substr(data, 1, 32)`,
		`UPDATE evidence_tiles SET data = zeroblob(length(data))`,
		`DELETE FROM evidence_tiles`,
		`UPDATE evidence_log SET size = 1`,
		`DELETE FROM evidence_log`,
		`UPDATE evidence_checkpoints SET note = ''`,
		`DELETE FROM evidence_checkpoints`,
	} {
		if _, err := f.db.Exec(q); err == nil {
			t.Errorf("%s: allowed", q)
		}
	}
}

// BenchmarkLogDelay: how long an entry waits between being durable and
// being provable (integrated into the log by the sequencer), appended
// by one caller and by 32 callers per CPU.
func BenchmarkLogDelay(b *testing.B) {
	for _, c := range []struct {
		name string
		par  int
	}{{"sequential", 0}, {"concurrent", 32}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(ctx, filepath.Join(b.TempDir(), "packrun.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchLogDelay(b, s, s.LogDelays, c.par)
		})
	}
}

// The sequencer integrates the entries its writer committed without
// reading them back, and reads them from the tables where the writer
// holds none: entries another process appended between this one's, or
// appended before the store was opened. Either way the log is the tree
// of the chain.
func TestEvidenceLogFromTheWritersEntries(t *testing.T) {
	f := newFixture(t, Options{})
	appendNotes(t, f, "before", 4)
	f = reopen(t, f) // 4 entries the new writer never held
	other, err := Open(ctx, f.path, Options{Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	closeOther := sync.OnceFunc(func() { other.Close() })
	defer closeOther()
	theOther := &fixture{Store: other, path: f.path, clock: f.clock}
	appendNotes(t, f, "a", 3)
	appendNotes(t, theOther, "b", 2) // a gap in f's entries
	appendNotes(t, f, "c", 3)
	storetest.CheckLog(t, f.Store, storetest.ChainHashes(t, f.Store), nil)
	appendNotes(t, theOther, "d", 1)
	// What the log integrated is let go by the next integration (the
	// other store, closed now, no longer integrates f's entries first).
	closeOther()
	appendNotes(t, f, "e", 2)
	hashes := storetest.ChainHashes(t, f.Store)
	if cp := storetest.CheckLog(t, f.Store, hashes, nil); cp.Size != 15 {
		t.Fatalf("log size %d, want 15", cp.Size)
	}
	for _, e := range f.logKnown.Held() {
		if e.Seq <= 15 {
			t.Fatalf("the writer still holds integrated entry %d", e.Seq)
		}
	}
}

// Only committed entries are held: a transaction rolled back adds none,
// one committed adds what it appended, in order.
func TestWriterHoldsOnlyCommittedEntries(t *testing.T) {
	d, err := sql.Open("sqlite3", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn, err := d.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	x := &wtx{conn: conn, stmts: map[string]*sql.Stmt{}, known: &storecore.KnownEntries{}}
	step := func(q string) {
		t.Helper()
		if _, err := x.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	step(`BEGIN IMMEDIATE`)
	x.appendedEntry(eventHead{seq: 1, hash: "a"})
	x.appendedEntry(eventHead{seq: 2, hash: "b"})
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
	step(`BEGIN IMMEDIATE`)
	x.appendedEntry(eventHead{seq: 3, hash: "rolled back"})
	x.rollback()
	step(`BEGIN IMMEDIATE`)
	x.appendedEntry(eventHead{seq: 3, hash: "c"})
	if err := x.commit(); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(x.known.From(1, 10)); got != "[a b c]" || x.committed == nil || x.committed.seq != 3 {
		t.Fatalf("held %s, committed head %+v; want [a b c] and 3", got, x.committed)
	}
	for _, st := range x.stmts {
		st.Close()
	}
}
