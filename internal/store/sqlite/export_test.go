package sqlite

import (
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/store/storemove"
)

// exportHome is a closed store with a task, an attempt and an artifact,
// its chain's head and its files.
func exportHome(t *testing.T) (ExportFiles, *host.ChainReport, *host.Artifact) {
	t.Helper()
	dir := t.TempDir()
	files := ExportFiles{DB: filepath.Join(dir, "packrun.db"), PackBlobDir: filepath.Join(dir, "blobs"), ArtifactDir: filepath.Join(dir, "artifacts")}
	s, err := Open(ctx, files.DB, Options{BlobDir: files.ArtifactDir, PackBlobDir: files.PackBlobDir})
	if err != nil {
		t.Fatal(err)
	}
	task := mustEnqueue(t, s, intent("work", nil), host.EnqueueOptions{})
	mustEnqueue(t, s, intent("work", nil), host.EnqueueOptions{})
	a := attemptFor(t, s, task)
	art, err := s.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: a.AttemptID, Role: host.RoleOutput, Name: "out.txt", ContentType: "text/plain", Data: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	chain, err := s.VerifyChain(ctx)
	if err != nil || !chain.OK {
		t.Fatalf("chain: %+v %v", chain, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return files, chain, art
}

func openExport(t *testing.T, files ExportFiles) *Export {
	t.Helper()
	e, err := OpenExport(ctx, files)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// The export stream yields the store's data tables with their counts
// (not its bookkeeping), each table's rows column for column, the blobs
// the rows name and the chain's head.
func TestExportStream(t *testing.T) {
	files, chain, art := exportHome(t)
	e := openExport(t, files)
	tables, err := e.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]storemove.Table{}
	for _, tb := range tables {
		byName[tb.Name] = tb
	}
	for _, skipped := range []string{"schema_migrations", "dispatch_locks", "evidence_anchors", "sqlite_sequence"} {
		if _, ok := byName[skipped]; ok {
			t.Errorf("table %s exported", skipped)
		}
	}
	if byName["tasks"].Rows != 2 || byName["attempt_records"].Rows != 1 || byName["artifacts"].Rows != 1 || byName["runtime_events"].Rows == 0 {
		t.Fatalf("tables: %+v", byName)
	}
	var digests []string
	for _, tb := range tables {
		var n int64
		for row, err := range e.Rows(ctx, tb) {
			if err != nil {
				t.Fatalf("table %s: %v", tb.Name, err)
			}
			if len(row) != len(tb.Columns) {
				t.Fatalf("table %s: %d values for %d columns", tb.Name, len(row), len(tb.Columns))
			}
			if kind, d := storemove.BlobRefs(tb.Name, tb.Columns, row); kind == storemove.Artifact {
				digests = append(digests, d...)
			}
			n++
		}
		if n != tb.Rows {
			t.Errorf("table %s: %d rows yielded, %d counted", tb.Name, n, tb.Rows)
		}
	}
	if !slices.Equal(digests, []string{art.SHA256}) {
		t.Fatalf("artifact digests %v, want %s", digests, art.SHA256)
	}
	if b, err := e.Blob(ctx, storemove.Artifact, art.SHA256); err != nil || string(b) != "hello" {
		t.Fatalf("artifact blob: %q %v", b, err)
	}
	if seq, head, err := e.Head(ctx); err != nil || seq != chain.HeadSeq || head != chain.Head {
		t.Fatalf("head %d %s (%v), the chain's %d %s", seq, head, err, chain.HeadSeq, chain.Head)
	}
	// A subset of the columns, as a target that drops some asks.
	tasks := byName["tasks"]
	tasks.Columns = []string{"task_id"}
	for row, err := range e.Rows(ctx, tasks) {
		if _, ok := row[0].(string); err != nil || len(row) != 1 || !ok {
			t.Fatalf("task ids only: %v %v", row, err)
		}
	}
	tasks.Columns = []string{"no_such_column"}
	for _, err := range e.Rows(ctx, tasks) {
		if err == nil || !strings.Contains(err.Error(), "column no_such_column") {
			t.Fatalf("a column the store lacks: %v", err)
		}
	}
}

// A blob file changed or missing is refused naming the file.
func TestExportBlobChecked(t *testing.T) {
	files, _, art := exportHome(t)
	e := openExport(t, files)
	p := blobs.Dir{Path: files.ArtifactDir}.File(art.SHA256)
	if err := os.WriteFile(p, []byte("hellO"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := e.Blob(ctx, storemove.Artifact, art.SHA256)
	if !errorsIs(err, host.ErrTampered) || !strings.Contains(err.Error(), p) {
		t.Fatalf("changed blob: %v", err)
	}
	os.Remove(p)
	_, err = e.Blob(ctx, storemove.Artifact, art.SHA256)
	if !errorsIs(err, host.ErrNotFound) || !strings.Contains(err.Error(), "artifact "+art.SHA256+" is missing") {
		t.Fatalf("missing blob: %v", err)
	}
	if _, err := e.Blob(ctx, storemove.PackBlob, art.SHA256); !errorsIs(err, host.ErrNotFound) || !strings.Contains(err.Error(), "pack blob") {
		t.Fatalf("a pack blob is looked for among the pack blobs: %v", err)
	}
}

// Attempts still in the table older packruns kept them in are refused,
// saying how to carry them over; an export of a missing database is
// refused before anything is created.
func TestExportRefusesLegacyAttempts(t *testing.T) {
	files, _, _ := exportHome(t)
	d, err := sql.Open("sqlite3", files.DB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`CREATE TABLE task_attempts (x TEXT); INSERT INTO task_attempts VALUES ('old')`); err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = openExport(t, files).Tables(ctx)
	if !errorsIs(err, host.ErrConflict) || !strings.Contains(err.Error(), "table task_attempts holds 1 row") || !strings.Contains(err.Error(), "older packrun") {
		t.Fatalf("legacy attempts: %v", err)
	}
	missing := ExportFiles{DB: filepath.Join(t.TempDir(), "packrun.db")}
	if _, err := OpenExport(ctx, missing); err == nil {
		t.Fatal("an export of a missing database was opened")
	}
	if _, err := os.Stat(missing.DB); err == nil {
		t.Fatal("an export created the database")
	}
}
