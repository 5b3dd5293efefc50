package postgres

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/store/storemove"
)

// TableCount is how many rows one table has in the source and, after
// the copy, in this store.
type TableCount = storemove.TableCount

// ImportReport is what Import copied and what it found.
type ImportReport = storemove.Report

// droppedColumns are the source's columns this store has no use for:
// a message's list cursor here is its event's seq (event_seq).
var droppedColumns = map[string]bool{"messages.seq": true}

// seededWorkflow is the row migrations insert into workflows: a store
// holding only it is empty.
const seededWorkflow = `workflow_type = 'goal-loop' AND updated_at = '1970-01-01T00:00:00Z'`

// Import copies a store's export stream (internal/store/sqlite's Export, a
// home's packrun.db and its blob files) into this one, which must be
// empty: every table row for row, columns mapped by name (this store's
// extra columns take their defaults), every stored byte as it is (times,
// event data, attempt records, sealed secret values: the chain's hashes
// and the secret key's seals hold here as there), and the blobs its packs
// and artifacts name, each checked against its sha256, into pack_blobs
// and blobs. The copy is one transaction here, in which the chain is
// verified, and its head checked against the source's, before it
// commits: any failure — a target not empty, a missing or corrupted
// blob, a secret value this store's key cannot open, a chain that does
// not verify — leaves this store as it was.
func (s *Store) Import(ctx context.Context, src storemove.Source) (*ImportReport, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, host.Wrap(storemove.Op, "", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	im := &importer{s: s, ctx: ctx, src: src, tx: tx, rep: &ImportReport{}}
	if err := im.run(); err != nil {
		return nil, host.Wrap(storemove.Op, "", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, host.Wrap(storemove.Op, "", err)
	}
	if c := im.rep.Chain; c != nil && c.HeadSeq > 0 {
		s.committed(&host.ChainHead{Seq: c.HeadSeq, Hash: c.Head}, time.Now()) // this node appended the copied chain
	}
	return im.rep, nil
}

// importer is one Import under way.
type importer struct {
	s   *Store
	ctx context.Context
	src storemove.Source
	tx  pgx.Tx
	rep *ImportReport
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
			return fmt.Errorf("table %s: %w", t.Name, err)
		}
	}
	if err := im.copyBlobs("pack_blobs", storemove.PackBlob, im.packBlobs, &im.rep.PackBlobs); err != nil {
		return err
	}
	if err := im.copyBlobs("blobs", storemove.Artifact, im.artifacts, &im.rep.Artifacts); err != nil {
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
		if t == "schema_migrations" || t == "store_generations" || t == "evidence_anchors" || t == "config_version" {
			continue
		}
		q := `SELECT count(*) FROM ` + pgx.Identifier{t}.Sanitize()
		if t == "workflows" {
			q += ` WHERE NOT (` + seededWorkflow + `)`
		}
		if t == "evidence_log" {
			q += ` WHERE size > 0` // its one row, as the migration seeds it
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
		return host.Errorf(storemove.Op, "", host.ErrConflict, "the target store is not empty: %s; copy into an empty database", strings.Join(held, ", "))
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
// left behind silently).
func (im *importer) sourceTables() ([]storemove.Table, error) {
	all, err := im.src.Tables(im.ctx)
	if err != nil {
		return nil, err
	}
	var out []storemove.Table
	for _, t := range all {
		if im.cols[t.Name] != nil {
			out = append(out, t)
			continue
		}
		if t.Rows > 0 {
			return nil, host.Errorf(storemove.Op, "", host.ErrConflict, "table %s holds %d %s: this store has no such table", t.Name, t.Rows, plural(t.Rows, "row"))
		}
	}
	return out, nil
}

// copyTable copies one table's rows in the source's insertion order
// (identity columns this store generates, such as openwop_runs' seq,
// come out in the same order) and checks the counts. A source column
// this store lacks (but the dropped ones) is refused.
func (im *importer) copyTable(t storemove.Table) error {
	var cols, types []string
	for _, c := range t.Columns {
		if droppedColumns[t.Name+"."+c] {
			continue
		}
		typ, ok := im.cols[t.Name][c]
		if !ok {
			return fmt.Errorf("column %s: this store has no such column", c)
		}
		cols, types = append(cols, c), append(types, typ)
	}
	want := t.Rows
	t.Columns = cols
	next, stop := iter.Pull2(im.src.Rows(im.ctx, t))
	defer stop()
	var readErr error // returned as it is: CopyFrom's error only quotes it
	n, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{t.Name}, cols, pgx.CopyFromFunc(func() ([]any, error) {
		raw, rerr, ok := next()
		if !ok {
			return nil, nil
		}
		row, err := im.row(t.Name, cols, types, raw, rerr)
		readErr = err
		return row, err
	}))
	if readErr != nil {
		return readErr
	}
	if err != nil {
		return err
	}
	got, err := im.targetCount(t.Name)
	if err != nil {
		return err
	}
	im.rep.Tables = append(im.rep.Tables, TableCount{Table: t.Name, Source: want, Target: got})
	if n != want || got != want {
		return fmt.Errorf("the source has %d rows, %d were copied and this store has %d (was a packrun writing to the home?)", want, n, got)
	}
	return nil
}

// row converts one source row to this store's column types and notes
// the blobs it names.
func (im *importer) row(table string, cols, types []string, raw []any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	if len(raw) != len(cols) {
		return nil, fmt.Errorf("a row of %d values for %d columns", len(raw), len(cols))
	}
	out := make([]any, len(cols))
	for i, v := range raw {
		if out[i], err = convert(v, types[i]); err != nil {
			return nil, fmt.Errorf("column %s: %w", cols[i], err)
		}
	}
	im.noteDigests(table, cols, out)
	return out, nil
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

// noteDigests remembers the blobs a copied row names.
func (im *importer) noteDigests(table string, cols []string, row []any) {
	switch kind, digests := storemove.BlobRefs(table, cols, row); {
	case len(digests) == 0:
	case kind == storemove.PackBlob:
		im.packBlobs = append(im.packBlobs, digests...)
	default:
		im.artifacts = append(im.artifacts, digests...)
	}
}

// copyBlobs reads each named blob from the source (which checks it
// against its digest) and stores it in table (sha256, data), each once.
func (im *importer) copyBlobs(table string, kind storemove.BlobKind, digests []string, count *int) error {
	slices.Sort(digests)
	digests = slices.Compact(digests)
	i := 0
	var readErr error // returned as it is: CopyFrom's error only quotes it
	_, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{table}, []string{"sha256", "data"}, pgx.CopyFromFunc(func() ([]any, error) {
		if i == len(digests) {
			return nil, nil
		}
		digest := digests[i]
		i++
		b, err := im.src.Blob(im.ctx, kind, digest)
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
				return host.Errorf(storemove.Op, subject, host.ErrConflict, "a secret value stored in plaintext by an older packrun: open the home with this one (any command) to seal it, then copy")
			}
			return nil
		}
		if im.s.secret == nil {
			return host.Errorf(storemove.Op, subject, storecore.ErrSecretKey, "a sealed secret value, and this store has no secret key to open it")
		}
		if _, err := im.s.secret.Open(sc, key, value); err != nil {
			return host.Errorf(storemove.Op, subject, storecore.ErrSecretKey, "the secret value does not open with this secret key (%v): use the home's secret.key", err)
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
		brk, err = storecore.FindUnchained(im.ctx, corePool{im.tx}, storecore.PostgresDialect)
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
	seq, head, err := im.src.Head(im.ctx)
	if err != nil {
		return err
	}
	if rep.HeadSeq != seq || rep.Head != head {
		return host.Errorf(storemove.Op, "", host.ErrTampered, "the copied chain ends at %d (%s), the source's at %d (%s)", rep.HeadSeq, rep.Head, seq, head)
	}
	im.rep.Chain = rep
	return nil
}
