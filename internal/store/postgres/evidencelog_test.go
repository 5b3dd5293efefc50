package postgres

import (
	"fmt"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storetest"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

func openLogStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(ctx, dsn, Options{HostKey: testHostKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func appendNotes(t *testing.T, s *Store, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// A database from before the log (its migration not applied, which then
// applies again over what is left) has its whole chain integrated when a
// node opens it.
func TestEvidenceLogMigratesDatabaseWithoutLog(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openLogStore(t, dsn)
	appendNotes(t, s, "old", 25)
	for _, q := range []string{`DROP TABLE evidence_tiles`, `DROP TABLE evidence_log`, `DROP TABLE evidence_checkpoints`,
		`DELETE FROM schema_migrations WHERE version >= 10`} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = openLogStore(t, dsn)
	hashes := storetest.ChainHashes(t, s)
	if cp, err := s.LogCheckpoint(ctx, 0); err != nil || cp.Size != uint64(len(hashes)) || len(hashes) != 25 {
		t.Fatalf("log as the database opened: %+v %v; the chain has %d entries", cp, err, len(hashes))
	}
	storetest.CheckLog(t, s, hashes, nil)
}

// A node that stopped with entries durable but not integrated keeps what
// was integrated; the next node to open integrates the rest.
func TestEvidenceLogIntegratesPendingAfterCrash(t *testing.T) {
	dsn := pgtest.DSN(t)
	s := openLogStore(t, dsn)
	appendNotes(t, s, "a", 5)
	if cp, err := s.LogSync(ctx); err != nil || cp.Size != 5 {
		t.Fatalf("LogSync: %+v %v", cp, err)
	}
	s.logSeq.Close() // the sequencer is gone: what follows stays pending
	appendNotes(t, s, "b", 7)
	if cp, err := s.LogCheckpoint(ctx, 0); err != nil || cp.Size != 5 {
		t.Fatalf("log after the sequencer stopped: %+v %v", cp, err)
	}
	s.Close()
	s = openLogStore(t, dsn)
	if cp, err := s.LogCheckpoint(ctx, 0); err != nil || cp.Size != 12 {
		t.Fatalf("log as the database opened again: %+v %v", cp, err)
	}
	storetest.CheckLog(t, s, storetest.ChainHashes(t, s), []uint64{5})
}

// The log's tables are append-only on PostgreSQL too.
func TestEvidenceLogTablesAppendOnly(t *testing.T) {
	s := openLogStore(t, pgtest.DSN(t))
	appendNotes(t, s, "a", 3)
	if _, err := s.LogSync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE evidence_tiles SET width = 1, data = substring(data FROM 1 FOR 32)`,
		`UPDATE evidence_tiles SET data = decode(repeat('00', length(data)), 'hex')`,
		`DELETE FROM evidence_tiles`,
		`UPDATE evidence_log SET size = 1`,
		`DELETE FROM evidence_log`,
		`UPDATE evidence_checkpoints SET note = ''`,
		`DELETE FROM evidence_checkpoints`,
	} {
		if _, err := s.pool.Exec(ctx, q); err == nil {
			t.Errorf("%s: allowed", q)
		}
	}
}

// BenchmarkLogDelay: as internal/store/sqlite's, on one node.
func BenchmarkLogDelay(b *testing.B) {
	for _, c := range []struct {
		name string
		par  int
	}{{"sequential", 0}, {"concurrent", 32}} {
		b.Run(c.name, func(b *testing.B) {
			s, err := Open(ctx, pgtest.DSN(b), Options{HostKey: testHostKey})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchLogDelay(b, s, s.LogDelays, c.par)
		})
	}
}

// A node's sequencer integrates the entries the node placed itself (its
// writers alone, its link passes) without reading them back, and reads
// the others' from the tables: either way the log is the chain's tree.
func TestEvidenceLogFromThePlacedEntries(t *testing.T) {
	dsn := pgtest.DSN(t)
	a := openLogStore(t, dsn)
	a.logSeq.Close() // integrated below, by hand
	appendNotes(t, a, "a", 5)
	held := a.logKnown.Held()
	hashes := storetest.ChainHashes(t, a)
	if len(held) != 5 || len(hashes) != 5 {
		t.Fatalf("node a holds %d entries of the chain's %d", len(held), len(hashes))
	}
	for _, e := range held {
		if hashes[e.Seq-1] != e.Hash {
			t.Fatalf("node a holds entry %d as %s, the chain has %s", e.Seq, e.Hash, hashes[e.Seq-1])
		}
	}
	if n, size, err := a.integrateLog(ctx, 100); err != nil || n != 5 || size != 5 {
		t.Fatalf("integrate: %d entries, size %d, %v", n, size, err)
	}
	if h := a.logKnown.Held(); len(h) != 0 {
		t.Fatalf("node a still holds %v after integrating them", h)
	}
	// Another node's entries between a's: a reads them.
	b := openLogStore(t, dsn)
	appendNotes(t, b, "b", 3)
	appendNotes(t, a, "a2", 4)
	appendNotes(t, b, "b2", 2)
	appendNotes(t, a, "a3", 2)
	if _, _, err := a.integrateLog(ctx, 100); err != nil {
		t.Fatal(err)
	}
	hashes = storetest.ChainHashes(t, a)
	if cp := storetest.CheckLog(t, a, hashes, []uint64{5}); cp.Size != 16 {
		t.Fatalf("log size %d, want 16", cp.Size)
	}
}
