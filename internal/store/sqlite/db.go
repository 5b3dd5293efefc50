package sqlite

// Opening packrun's SQLite database ($PACKRUN_HOME/packrun.db) with the
// settings every component relies on (WAL, busy timeout, foreign keys),
// and applying each component's migrations once, recording them in
// schema_migrations. This is the one package that opens it.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// openDB opens (creating if needed) the database at path. The database holds
// everything packrun records, so it is readable by its owner only: a new
// file is created 0600 (SQLite gives its -wal and -shm files the database
// file's mode), and an existing file, -wal or -shm that others may read is
// narrowed to its owner's bits (packrun.db of an older home was 0644). A
// file that cannot be narrowed (another user's) is opened as it is.
func openDB(ctx context.Context, path string) (*sql.DB, error) {
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", "NORMAL")
	q.Set("_txlock", "immediate")
	d, err := sql.Open("sqlite3", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := d.PingContext(ctx); err != nil {
		d.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	_, err = d.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		component TEXT NOT NULL,
		version INTEGER NOT NULL,
		applied_at TEXT NOT NULL,
		PRIMARY KEY (component, version))`)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return d, nil
}

// ownerOnly creates path empty with mode 0600 (SQLite takes an empty file
// for a new database) or, if it exists, takes the group and other bits off
// it and its -wal and -shm files. An in-memory database has no file.
func ownerOnly(path string) error {
	if path == "" || path == ":memory:" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o077 != 0 {
			_ = os.Chmod(p, fi.Mode().Perm()&^0o077) // best effort: see openDB
		}
	}
	return nil
}

// migrateDB applies, in order and each in its own transaction, the migrations
// of component that are not yet recorded. migrations[i] is version i+1;
// published migrations are never edited, only appended.
func migrateDB(ctx context.Context, d *sql.DB, component string, migrations []string) error {
	for i, stmt := range migrations {
		version := i + 1
		tx, err := d.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE component = ? AND version = ?`, component, version).Scan(&n); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		if n > 0 {
			tx.Rollback()
			continue
		}
		if _, err := tx.ExecContext(ctx, stmt); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s to version %d: %w", component, version, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (component, version, applied_at) VALUES (?, ?, ?)`,
			component, version, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
			tx.Rollback()
			return fmt.Errorf("migrate %s: %w", component, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate %s: %w", component, err)
		}
	}
	return nil
}
