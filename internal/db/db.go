// Package db opens packrun's SQLite database ($PACKRUN_HOME/packrun.db) with
// the settings every component relies on (WAL, busy timeout, foreign keys) and
// applies each component's migrations once, recording them in
// schema_migrations.
package db

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	_ "github.com/mattn/go-sqlite3" // registers the "sqlite3" driver
)

// Open opens (creating if needed) the database at path.
func Open(ctx context.Context, path string) (*sql.DB, error) {
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

// Migrate applies, in order and each in its own transaction, the migrations
// of component that are not yet recorded. migrations[i] is version i+1;
// published migrations are never edited, only appended.
func Migrate(ctx context.Context, d *sql.DB, component string, migrations []string) error {
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
