package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/store/storemove"
)

// ExportFiles names a SQLite store's files: its database and the
// directories of the bytes its rows name by sha256.
type ExportFiles struct {
	// DB is the database file (a home's packrun.db).
	DB string
	// PackBlobDir holds the installed packs' blobs (a home's blobs/sha256).
	PackBlobDir string
	// ArtifactDir holds artifact contents (a home's artifacts/sha256).
	ArtifactDir string
}

// Export is a SQLite store's content as an export stream
// (storemove.Source), read in one read-only transaction: a consistent
// snapshot. The database is opened read-only and as it is (no migration
// runs), so the home is never written.
type Export struct {
	files ExportFiles
	db    *sql.DB
	tx    *sql.Tx
}

var _ storemove.Source = (*Export)(nil)

// Tables of a SQLite store an export leaves out: the migrations applied
// (the target records its own), the dispatch lock (a lease of the home's
// dispatcher, not data), SQLite's bookkeeping of AUTOINCREMENT, and the
// key the home anchored its chain with (each node records its own when
// it opens: the home's checkpoint, signed by the same host key, carries
// the anchor over).
var notExported = map[string]bool{"schema_migrations": true, "dispatch_locks": true, "sqlite_sequence": true, "evidence_anchors": true,
	// The evidence log is derived from the chain: the target's sequencer
	// integrates the copied chain into the same tree (same roots), and
	// signs its checkpoints with its own key.
	"evidence_tiles": true, "evidence_log": true, "evidence_checkpoints": true}

// OpenExport opens the SQLite store files name for an export. Close it
// when done.
func OpenExport(ctx context.Context, files ExportFiles) (*Export, error) {
	if _, err := os.Stat(files.DB); err != nil {
		return nil, host.Wrap(storemove.Op, files.DB, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "10000")
	d, err := sql.Open("sqlite3", "file:"+files.DB+"?"+q.Encode())
	if err != nil {
		return nil, host.Wrap(storemove.Op, files.DB, err)
	}
	d.SetMaxOpenConns(1)
	tx, err := d.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		d.Close()
		return nil, host.Wrap(storemove.Op, files.DB, err)
	}
	return &Export{files: files, db: d, tx: tx}, nil
}

// Close ends the snapshot and closes the database.
func (e *Export) Close() error {
	e.tx.Rollback()
	return e.db.Close()
}

// Tables lists the store's tables with rows to copy. Attempts in the
// table older packruns kept them in are refused: opening the home with
// this packrun carries them over.
func (e *Export) Tables(ctx context.Context) ([]storemove.Table, error) {
	rows, err := e.tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []storemove.Table
	for _, name := range names {
		if notExported[name] || strings.HasPrefix(name, "sqlite_") {
			continue
		}
		t := storemove.Table{Name: name}
		if err := e.tx.QueryRowContext(ctx, `SELECT count(*) FROM `+quoteIdent(name)).Scan(&t.Rows); err != nil {
			return nil, err
		}
		if name == "task_attempts" && t.Rows > 0 {
			return nil, host.Errorf(storemove.Op, "", host.ErrConflict, "table %s holds %d %s: they were stored by an older packrun: open the home with this one (any command) to carry them over, then copy", name, t.Rows, plural(t.Rows, "row"))
		}
		if t.Columns, err = e.columns(ctx, name); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// columns lists a table's columns in the store's order, and an event's
// tenant for a store from before it was kept (Rows works it out).
func (e *Export) columns(ctx context.Context, table string) ([]string, error) {
	cols, err := e.storedColumns(ctx, table)
	if err == nil && table == "runtime_events" && !slices.Contains(cols, "tenant") {
		cols = append(cols, "tenant")
	}
	return cols, err
}

// storedColumns lists the columns a table has, in the store's order.
func (e *Export) storedColumns(ctx context.Context, table string) ([]string, error) {
	rows, err := e.tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// Rows yields t's rows in insertion order; t.Columns may leave out
// columns Tables listed (rowid: identity columns a
// target generates, such as openwop_runs' seq, come out in the same
// order).
func (e *Export) Rows(ctx context.Context, t storemove.Table) iter.Seq2[[]any, error] {
	return func(yield func([]any, error) bool) {
		if err := e.rows(ctx, t, yield); err != nil {
			yield(nil, err)
		}
	}
}

func (e *Export) rows(ctx context.Context, t storemove.Table, yield func([]any, error) bool) error {
	stored, err := e.storedColumns(ctx, t.Name)
	if err != nil {
		return err
	}
	sel := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		switch {
		case slices.Contains(stored, c):
			sel[i] = quoteIdent(c)
		case t.Name == "runtime_events" && c == "tenant":
			// A store from before each event's tenant was kept: worked
			// out as the migration that added the column does.
			sel[i] = storecore.EventTenantSQLite
		default:
			return fmt.Errorf("column %s: the store has no such column", c)
		}
	}
	rows, err := e.tx.QueryContext(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM `+quoteIdent(t.Name)+` e ORDER BY e.rowid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		row := make([]any, len(sel))
		ptrs := make([]any, len(sel))
		for i := range row {
			ptrs[i] = &row[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		if !yield(row, nil) {
			return nil
		}
	}
	return rows.Err()
}

// Blob reads one blob file of the store, checked against its digest.
func (e *Export) Blob(_ context.Context, kind storemove.BlobKind, digest string) ([]byte, error) {
	dir := e.files.ArtifactDir
	if kind == storemove.PackBlob {
		dir = e.files.PackBlobDir
	}
	p := blobs.Dir{Path: dir}.File(digest)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, host.Errorf(storemove.Op, "", host.ErrNotFound, "%s %s is missing: no file %s", kind, digest, p)
	}
	if err != nil {
		return nil, err
	}
	if blobs.Digest(b) != digest {
		return nil, host.Errorf(storemove.Op, "", host.ErrTampered, "%s %s does not match its sha256: %s was changed", kind, digest, p)
	}
	return b, nil
}

// Head is the last seq and hash of the store's evidence chain.
func (e *Export) Head(ctx context.Context) (int64, string, error) {
	var seq int64
	head := evidence.GenesisHash
	err := e.tx.QueryRowContext(ctx, `SELECT seq, hash FROM (SELECT seq, hash FROM runtime_events UNION ALL SELECT seq, hash FROM attempt_records) ORDER BY seq DESC LIMIT 1`).Scan(&seq, &head)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, "", err
	}
	return seq, head, nil
}
