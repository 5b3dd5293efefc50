package postgres

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// sqliteHome is a SQLite store in a temporary directory, sealing secrets
// with key.
type sqliteHome struct {
	src SQLiteSource
	key []byte
	*sqlite.Store
}

func newSQLiteHome(t *testing.T) *sqliteHome {
	t.Helper()
	dir := t.TempDir()
	key := make([]byte, storecore.SecretKeyLen)
	rand.Read(key)
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &sqliteHome{key: key, src: SQLiteSource{DB: filepath.Join(dir, "packrun.db"),
		PackBlobDir: filepath.Join(dir, "blobs", "sha256"), ArtifactDir: filepath.Join(dir, "artifacts", "sha256")}}
	var err error
	h.Store, err = sqlite.Open(ctx, h.src.DB, sqlite.Options{SecretKeyFile: keyFile, BlobDir: h.src.ArtifactDir, PackBlobDir: h.src.PackBlobDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func openWithKey(t *testing.T, dsn string, key []byte) *Store {
	t.Helper()
	s, err := Open(ctx, dsn, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// After the copy the queue goes on: a task that was running in the home
// has an expired lease any node reclaims, new tasks and chain entries
// follow the copied ones, the secret value reads with the home's key.
func TestImportSQLiteKeepsGoing(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newSQLiteHome(t)
	var copied []string
	for range 3 {
		rec, err := h.Enqueue(ctx, intent("work", 0), host.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		copied = append(copied, rec.TaskID)
	}
	if _, err := h.Claim(ctx, "old-runner", time.Time{}); err != nil {
		t.Fatal(err)
	}
	sc := host.Scope{Tenant: host.DefaultTenant, Namespace: "ns"}
	if err := h.Put(ctx, sc, "k", json.RawMessage(`"s3cret"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	h.Close()

	s := openWithKey(t, dsn, h.key)
	rep, err := s.ImportSQLite(ctx, h.src)
	if err != nil || !rep.Chain.OK {
		t.Fatalf("import: %+v %v", rep, err)
	}
	if n, err := s.ReclaimExpired(ctx, time.Time{}); err != nil || n != 1 {
		t.Fatalf("reclaimed %d (%v), want the task running in the home", n, err)
	}
	fresh := mustEnqueue(t, s, intent("work", 0))
	list, err := s.ListTasks(ctx, host.TaskFilter{})
	if err != nil || len(list) != 4 {
		t.Fatalf("tasks: %d %v", len(list), err)
	}
	// Listed newest first: the new task after the copied ones.
	if list[0].TaskID != fresh.TaskID || list[3].TaskID != copied[0] {
		t.Fatalf("order: %s ... %s", list[0].TaskID, list[3].TaskID)
	}
	if e, err := s.Get(ctx, sc, "k"); err != nil || string(e.Value) != `"s3cret"` || !e.Secret {
		t.Fatalf("secret: %+v %v", e, err)
	}
	if chain, err := s.VerifyChain(ctx); err != nil || !chain.OK || chain.HeadSeq <= rep.Chain.HeadSeq {
		t.Fatalf("chain after new entries: %+v %v (copied head %d)", chain, err, rep.Chain.HeadSeq)
	}
}

// A secret value this store's key cannot open is refused before anything
// commits: with the home's key the same database takes the copy.
func TestImportSQLiteRefusesAnotherSecretKey(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newSQLiteHome(t)
	sc := host.Scope{Tenant: host.DefaultTenant, Namespace: "ns"}
	if err := h.Put(ctx, sc, "k", json.RawMessage(`"s3cret"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	h.Close()
	other := make([]byte, storecore.SecretKeyLen)
	_, err := openWithKey(t, dsn, other).ImportSQLite(ctx, h.src)
	if !errors.Is(err, storecore.ErrSecretKey) || !strings.Contains(err.Error(), "default/ns/k") {
		t.Fatalf("another key: %v", err)
	}
	if _, err := openWithKey(t, dsn, h.key).ImportSQLite(ctx, h.src); err != nil {
		t.Fatalf("the home's key, after the refusal: %v", err)
	}
}

// Rows in a table this store has no place for are refused, naming it:
// nothing is left behind silently.
func TestImportSQLiteRefusesAnUnknownTable(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newSQLiteHome(t)
	h.Close()
	d, err := sql.Open("sqlite3", h.src.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`CREATE TABLE mystery (x TEXT); INSERT INTO mystery VALUES ('?')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = openWithKey(t, dsn, h.key).ImportSQLite(ctx, h.src)
	if !errors.Is(err, host.ErrConflict) || !strings.Contains(err.Error(), "table mystery holds 1 row") {
		t.Fatalf("unknown table: %v", err)
	}
}

// An attempt whose values are stored out of line (evidence_values) is
// copied whole: it reads back with every value, and the copy verifies
// them; the home's old inline records come along unchanged.
func TestImportSQLiteCopiesValuesOutOfLine(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newSQLiteHome(t)
	big := json.RawMessage(`{"name":"` + strings.Repeat("x", 4*evidence.ValueMin) + `"}`)
	small := &host.Attempt{Outcome: abi.Completed, Input: json.RawMessage(`{"name":"x"}`)}
	large := &host.Attempt{Outcome: abi.Completed, Input: big, Output: big}
	for _, a := range []*host.Attempt{small, large} {
		if err := h.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	h.Close()

	s := openWithKey(t, dsn, h.key)
	rep, err := s.ImportSQLite(ctx, h.src)
	if err != nil || !rep.Chain.OK {
		t.Fatalf("import: %+v %v", rep, err)
	}
	got, err := s.Attempt(ctx, large.AttemptID)
	if err != nil || !bytes.Equal(got.Input, big) || !bytes.Equal(got.Output, big) || got.ContentHash != large.ContentHash {
		t.Fatalf("copied attempt: %v", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM evidence_values`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d values copied (%v), want 1: input and output are one content", n, err)
	}
	if chain, err := s.VerifyChain(ctx); err != nil || !chain.OK || chain.Attempts != 2 {
		t.Fatalf("chain: %+v %v", chain, err)
	}
}
