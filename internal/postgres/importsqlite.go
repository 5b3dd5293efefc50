package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	_ "github.com/mattn/go-sqlite3" // the SQLite store's driver, as internal/db

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/storecore"
)

// SQLiteSource names a SQLite store's files: its database and the
// directories of the bytes its rows name by sha256.
type SQLiteSource struct {
	// DB is the database file (a home's packrun.db).
	DB string
	// PackBlobDir holds the installed packs' blobs (a home's blobs/sha256).
	PackBlobDir string
	// ArtifactDir holds artifact contents (a home's artifacts/sha256).
	ArtifactDir string
}

// TableCount is how many rows one table has in the source and, after the
// copy, in this store (one row per table the source had).
type TableCount struct {
	Table  string `json:"table"`
	Source int64  `json:"source"`
	Target int64  `json:"target"`
}

// ImportReport is what ImportSQLite copied and what it found.
type ImportReport struct {
	Tables []TableCount `json:"tables"`
	// PackBlobs and Artifacts count the distinct blobs read from the
	// source's files into pack_blobs and blobs; Bytes is their size.
	PackBlobs int   `json:"pack_blobs"`
	Artifacts int   `json:"artifact_blobs"`
	Bytes     int64 `json:"bytes"`
	// Chain is the evidence chain as verified in this store, in the
	// copy's transaction before it committed.
	Chain *host.ChainReport `json:"chain"`
}

// Tables of a SQLite store ImportSQLite does not copy: the migrations
// applied (this store records its own), the dispatch lock (a lease of
// the home's dispatcher, not data; nodes here take their own) and
// SQLite's bookkeeping of AUTOINCREMENT, and the key the home anchored
// its chain with (each node records its own when it opens: the home's
// checkpoint, signed by the same host key, carries the anchor over).
var notCopied = map[string]bool{"schema_migrations": true, "dispatch_locks": true, "sqlite_sequence": true, "evidence_anchors": true}

// droppedColumns are the source's columns this store has no use for:
// a message's list cursor here is its event's seq (event_seq).
var droppedColumns = map[string]bool{"messages.seq": true}

// seededWorkflow is the row migrations insert into workflows: a store
// holding only it is empty.
const seededWorkflow = `workflow_type = 'goal-loop' AND updated_at = '1970-01-01T00:00:00Z'`

// ImportSQLite copies a SQLite store (the embedded default, internal/
// sqlite) into this one, which must be empty: every table row for row,
// columns mapped by name (this store's extra columns take their
// defaults), every stored byte as it is (times, event data, attempt
// records, sealed secret values: the chain's hashes and the secret key's
// seals hold here as there), and the blob files its packs and artifacts
// name, each checked against its sha256, into pack_blobs and blobs. The
// source is read in one read-only transaction (a consistent snapshot);
// the copy is one transaction here, in which the chain is verified
// before it commits: any failure — a target not empty, a missing or
// corrupted blob, a secret value this store's key cannot open, a chain
// that does not verify — leaves this store as it was.
func (s *Store) ImportSQLite(ctx context.Context, src SQLiteSource) (*ImportReport, error) {
	const op = "import sqlite store"
	sdb, stx, err := openSource(ctx, src.DB)
	if err != nil {
		return nil, host.Wrap(op, src.DB, err)
	}
	defer sdb.Close()
	defer stx.Rollback()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	im := &importer{s: s, ctx: ctx, src: stx, tx: tx, files: src, rep: &ImportReport{}}
	if err := im.run(); err != nil {
		return nil, host.Wrap(op, "", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, host.Wrap(op, "", err)
	}
	if c := im.rep.Chain; c != nil && c.HeadSeq > 0 {
		s.committed(&host.ChainHead{Seq: c.HeadSeq, Hash: c.Head}) // this node appended the copied chain
	}
	return im.rep, nil
}

// openSource opens the SQLite database read-only and starts the
// transaction every read of the copy shares.
func openSource(ctx context.Context, path string) (*sql.DB, *sql.Tx, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, nil, err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", "10000")
	d, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, nil, err
	}
	d.SetMaxOpenConns(1)
	stx, err := d.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, stx, nil
}

// importer is one ImportSQLite under way.
type importer struct {
	s     *Store
	ctx   context.Context
	src   *sql.Tx
	tx    pgx.Tx
	files SQLiteSource
	rep   *ImportReport
	// cols are this store's tables, each with its columns' data types.
	cols map[string]map[string]string
	// packBlobs and artifacts are the digests the copied rows name.
	packBlobs, artifacts []string
}

func (im *importer) run() error {
	if err := im.lockTarget(); err != nil {
		return err
	}
	if err := im.refuseNonEmpty(); err != nil {
		return err
	}
	tables, err := im.sourceTables()
	if err != nil {
		return err
	}
	if _, err := im.tx.Exec(im.ctx, `DELETE FROM workflows WHERE `+seededWorkflow); err != nil {
		return err
	}
	for _, t := range tables {
		if err := im.copyTable(t); err != nil {
			return fmt.Errorf("table %s: %w", t, err)
		}
	}
	if err := im.copyBlobs("pack_blobs", im.files.PackBlobDir, "pack blob", im.packBlobs, &im.rep.PackBlobs); err != nil {
		return err
	}
	if err := im.copyBlobs("blobs", im.files.ArtifactDir, "artifact", im.artifacts, &im.rep.Artifacts); err != nil {
		return err
	}
	if err := im.checkSecrets(); err != nil {
		return err
	}
	if err := im.settle(); err != nil {
		return err
	}
	return im.verify()
}

// lockTarget reads this store's tables and locks them against writers
// (readers go on) until the copy commits or rolls back: no node writes
// between the check that the store is empty and the copy.
func (im *importer) lockTarget() error {
	rows, err := im.tx.Query(im.ctx, `SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns
		WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position`)
	if err != nil {
		return err
	}
	im.cols = map[string]map[string]string{}
	var table, col, typ string
	if _, err := pgx.ForEachRow(rows, []any{&table, &col, &typ}, func() error {
		if im.cols[table] == nil {
			im.cols[table] = map[string]string{}
		}
		im.cols[table][col] = typ
		return nil
	}); err != nil {
		return err
	}
	names := make([]string, 0, len(im.cols))
	for t := range im.cols {
		names = append(names, pgx.Identifier{t}.Sanitize())
	}
	slices.Sort(names)
	_, err = im.tx.Exec(im.ctx, `LOCK TABLE `+strings.Join(names, ", ")+` IN EXCLUSIVE MODE`)
	return err
}

// refuseNonEmpty refuses a store holding anything but what its
// migrations put there, naming each table that holds more.
func (im *importer) refuseNonEmpty() error {
	var held []string
	for _, t := range slices.Sorted(maps.Keys(im.cols)) {
		if t == "schema_migrations" || t == "store_generations" || t == "evidence_anchors" {
			continue
		}
		q := `SELECT count(*) FROM ` + pgx.Identifier{t}.Sanitize()
		if t == "workflows" {
			q += ` WHERE NOT (` + seededWorkflow + `)`
		}
		var n int64
		if err := im.tx.QueryRow(im.ctx, q).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%s (%d %s)", t, n, plural(n, "row")))
		}
	}
	if len(held) > 0 {
		return host.Errorf("import sqlite store", "", host.ErrConflict, "the target store is not empty: %s; copy into an empty database", strings.Join(held, ", "))
	}
	return nil
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// sourceTables lists the source's tables to copy, in name order. A table
// this store has no place for is refused if it holds rows (nothing is
// left behind silently); so are attempts in the table older packruns kept
// them in, which opening the home with this packrun carries over.
func (im *importer) sourceTables() ([]string, error) {
	rows, err := im.src.QueryContext(im.ctx, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var all []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		all = append(all, name)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, t := range all {
		if notCopied[t] || strings.HasPrefix(t, "sqlite_") {
			continue
		}
		if im.cols[t] != nil {
			out = append(out, t)
			continue
		}
		n, err := im.sourceCount(t)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			hint := "this store has no such table"
			if t == "task_attempts" {
				hint = "they were stored by an older packrun: open the home with this one (any command) to carry them over, then copy"
			}
			return nil, host.Errorf("import sqlite store", "", host.ErrConflict, "table %s holds %d %s: %s", t, n, plural(n, "row"), hint)
		}
	}
	return out, nil
}

func (im *importer) sourceCount(table string) (int64, error) {
	var n int64
	err := im.src.QueryRowContext(im.ctx, `SELECT count(*) FROM `+quoteSQLite(table)).Scan(&n)
	return n, err
}

func quoteSQLite(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// sourceColumns are the source table's columns this store has, in the
// source's order; a column it lacks (but the dropped ones) is refused.
func (im *importer) sourceColumns(table string) ([]string, error) {
	rows, err := im.src.QueryContext(im.ctx, `SELECT name FROM pragma_table_info(?) ORDER BY cid`, table)
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
		if droppedColumns[table+"."+c] {
			continue
		}
		if _, ok := im.cols[table][c]; !ok {
			return nil, fmt.Errorf("column %s: this store has no such column", c)
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// copyTable copies one table's rows in the source's insertion order
// (rowid: identity columns this store generates, such as openwop_runs'
// seq, come out in the same order) and checks the counts.
func (im *importer) copyTable(table string) error {
	cols, err := im.sourceColumns(table)
	if err != nil {
		return err
	}
	want, err := im.sourceCount(table)
	if err != nil {
		return err
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = quoteSQLite(c)
	}
	if table == "runtime_events" && !slices.Contains(cols, "tenant") {
		// A store from before each event's tenant was kept: worked out
		// as the migration that added the column does.
		cols, quoted = append(cols, "tenant"), append(quoted, storecore.EventTenantSQLite)
	}
	rows, err := im.src.QueryContext(im.ctx, `SELECT `+strings.Join(quoted, ", ")+` FROM `+quoteSQLite(table)+` e ORDER BY e.rowid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	types := make([]string, len(cols))
	for i, c := range cols {
		types[i] = im.cols[table][c]
	}
	raw := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	next := func() ([]any, error) {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out := make([]any, len(cols))
		for i, v := range raw {
			var err error
			if out[i], err = convert(v, types[i]); err != nil {
				return nil, fmt.Errorf("column %s: %w", cols[i], err)
			}
		}
		im.noteDigests(table, cols, out)
		return out, nil
	}
	var readErr error // returned as it is: CopyFrom's error only quotes it
	n, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{table}, cols, pgx.CopyFromFunc(func() ([]any, error) {
		if !rows.Next() {
			readErr = rows.Err()
			return nil, readErr
		}
		row, err := next()
		readErr = err
		return row, err
	}))
	if readErr != nil {
		return readErr
	}
	if err != nil {
		return err
	}
	got, err := im.targetCount(table)
	if err != nil {
		return err
	}
	im.rep.Tables = append(im.rep.Tables, TableCount{Table: table, Source: want, Target: got})
	if n != want || got != want {
		return fmt.Errorf("the source has %d rows, %d were copied and this store has %d (was a packrun writing to the home?)", want, n, got)
	}
	return nil
}

func (im *importer) targetCount(table string) (int64, error) {
	var n int64
	err := im.tx.QueryRow(im.ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n)
	return n, err
}

// convert maps one SQLite value to the PostgreSQL column type: INTEGER
// 0/1 to boolean, text to bytea or bytea to text byte for byte.
func convert(v any, pgType string) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch pgType {
	case "boolean":
		if i, ok := v.(int64); ok {
			return i != 0, nil
		}
	case "bytea":
		switch x := v.(type) {
		case []byte:
			return slices.Clone(x), nil
		case string:
			return []byte(x), nil
		}
	case "text":
		switch x := v.(type) {
		case string:
			return x, nil
		case []byte:
			return string(x), nil
		}
	case "bigint", "integer":
		if i, ok := v.(int64); ok {
			return i, nil
		}
	}
	return nil, fmt.Errorf("a %T value does not fit a %s column", v, pgType)
}

// noteDigests remembers the blobs a copied row of packs or artifacts
// names.
func (im *importer) noteDigests(table string, cols []string, row []any) {
	for i, c := range cols {
		d, _ := row[i].(string)
		switch {
		case d == "":
		case table == "packs" && strings.HasSuffix(c, "_sha256"):
			im.packBlobs = append(im.packBlobs, d)
		case table == "artifacts" && c == "sha256":
			im.artifacts = append(im.artifacts, d)
		}
	}
}

// copyBlobs reads each named blob from dir, checks it against its
// digest, and stores it in table (sha256, data), each once.
func (im *importer) copyBlobs(table, dir, what string, digests []string, count *int) error {
	slices.Sort(digests)
	digests = slices.Compact(digests)
	d := blobs.Dir{Path: dir}
	i := 0
	var readErr error // returned as it is: CopyFrom's error only quotes it
	_, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{table}, []string{"sha256", "data"}, pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(digests) {
			return nil, nil
		}
		digest := digests[i]
		i++
		b, err := readBlob(d, digest, what)
		if err != nil {
			readErr = err
			return nil, err
		}
		im.rep.Bytes += int64(len(b))
		return []any{digest, b}, nil
	}))
	*count = len(digests)
	if readErr != nil {
		return readErr
	}
	return err
}

// readBlob reads one blob file: missing is ErrNotFound, bytes that do
// not match the digest are ErrTampered, each naming the file.
func readBlob(d blobs.Dir, digest, what string) ([]byte, error) {
	p := d.File(digest)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, host.Errorf("import sqlite store", "", host.ErrNotFound, "%s %s is missing: no file %s", what, digest, p)
	}
	if err != nil {
		return nil, err
	}
	if blobs.Digest(b) != digest {
		return nil, host.Errorf("import sqlite store", "", host.ErrTampered, "%s %s does not match its sha256: %s was changed", what, digest, p)
	}
	return b, nil
}

// checkSecrets opens every sealed memory value with this store's secret
// key: a key that is not the one that sealed them is refused now, not
// found when a value is read. A secret still in plaintext (stored by a
// packrun that did not seal) is refused too: opening the home with this
// packrun seals it.
func (im *importer) checkSecrets() error {
	rows, err := im.tx.Query(im.ctx, `SELECT tenant, namespace, key, value, secret FROM memory_entries WHERE secret OR substring(value from 1 for 1) = '\x00'::bytea`)
	if err != nil {
		return err
	}
	var sc host.Scope
	var key string
	var value []byte
	var secret bool
	_, err = pgx.ForEachRow(rows, []any{&sc.Tenant, &sc.Namespace, &key, &value, &secret}, func() error {
		subject := sc.Tenant + "/" + storecore.MemorySubject(sc, key)
		if !storecore.Sealed(value) {
			if secret {
				return host.Errorf("import sqlite store", subject, host.ErrConflict, "a secret value stored in plaintext by an older packrun: open the home with this one (any command) to seal it, then copy")
			}
			return nil
		}
		if im.s.secret == nil {
			return host.Errorf("import sqlite store", subject, storecore.ErrSecretKey, "a sealed secret value, and this store has no secret key to open it")
		}
		if _, err := im.s.secret.Open(sc, key, value); err != nil {
			return host.Errorf("import sqlite store", subject, storecore.ErrSecretKey, "the secret value does not open with this secret key (%v): use the home's secret.key", err)
		}
		return nil
	})
	return err
}

// settle brings what this store keeps beside the rows in line with them:
// each identity column's sequence continues after the copied values; a
// task that was running when the home was copied has a lease already
// expired, so that any node reclaims it; the packs generation moves, so
// that every node rereads the installed packs.
func (im *importer) settle() error {
	rows, err := im.tx.Query(im.ctx, `SELECT table_name::text, column_name::text FROM information_schema.columns
		WHERE table_schema = current_schema() AND is_identity = 'YES' ORDER BY table_name`)
	if err != nil {
		return err
	}
	type ident struct{ table, col string }
	idents, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ident, error) {
		var id ident
		return id, r.Scan(&id.table, &id.col)
	})
	if err != nil {
		return err
	}
	for _, id := range idents {
		t, c := pgx.Identifier{id.table}.Sanitize(), pgx.Identifier{id.col}.Sanitize()
		if _, err := im.tx.Exec(im.ctx, `SELECT setval(pg_get_serial_sequence($1, $2), m) FROM (SELECT max(`+c+`) AS m FROM `+t+`) x WHERE m IS NOT NULL`, t, id.col); err != nil {
			return err
		}
	}
	if _, err := im.tx.Exec(im.ctx, `UPDATE tasks SET lease_expires_at = updated_at WHERE status = 'running' AND lease_expires_at IS NULL`); err != nil {
		return err
	}
	_, err = im.tx.Exec(im.ctx, `UPDATE store_generations SET value = value + 1 WHERE name = $1`, packsGen)
	return err
}

// verify walks the copied chain as VerifyChain does, in the copy's
// transaction, and checks that its head is the source's.
func (im *importer) verify() error {
	rep := &host.ChainReport{Head: evidence.GenesisHash}
	brk, err := walkChain(im.ctx, im.tx, rep, nil)
	if err == nil && brk == nil {
		brk, err = findUnchained(im.ctx, im.tx)
	}
	if err == nil && brk == nil {
		brk, err = checkValues(im.ctx, im.tx) // evidence_values is copied as any table
	}
	if err != nil {
		return err
	}
	if brk != nil {
		return fmt.Errorf("the evidence chain does not verify after the copy: %w", brk)
	}
	rep.OK = true
	var seq int64
	head := evidence.GenesisHash
	err = im.src.QueryRowContext(im.ctx, `SELECT seq, hash FROM (SELECT seq, hash FROM runtime_events UNION ALL SELECT seq, hash FROM attempt_records) ORDER BY seq DESC LIMIT 1`).Scan(&seq, &head)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if rep.HeadSeq != seq || rep.Head != head {
		return host.Errorf("import sqlite store", "", host.ErrTampered, "the copied chain ends at %d (%s), the source's at %d (%s)", rep.HeadSeq, rep.Head, seq, head)
	}
	im.rep.Chain = rep
	return nil
}
