package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/internal/store/storecore"
)

// migrations of the host's tables, one file each in migrations/
// (NNNN_summary.sql, numbered without a gap): append only, never edit a
// published one.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = storecore.MustMigrations(migrationFiles, "migrations")

// Advisory lock keys (pg_advisory_xact_lock's bigint space is the whole
// database's: these spell "packrun" and a purpose).
const (
	// ChainLock serialises the passes that link pending entries into
	// the evidence chain (link.go); writers never take it.
	ChainLock int64 = 0x7061636b72756e01
	// migrateLock serialises migrations of nodes starting at once.
	migrateLock int64 = 0x7061636b72756e02
)

// migrate applies the migrations not yet recorded in schema_migrations,
// each recorded with its number, all in one transaction under a
// transaction-level advisory lock: several nodes starting at once apply
// each migration once, the others waiting and then finding it recorded.
func migrate(ctx context.Context, s *Store) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	// A starting node migrates, not a paused one: the short idle limit
	// set for paused nodes (Options.LeaseTTL) must not end a migration
	// whose round trips a loaded machine slows down.
	if _, err := tx.Exec(ctx, `SET LOCAL `+idleInTx+` = 0`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("the database is at migration %d; this packrun knows %d: upgrade packrun", have, len(migrations))
	}
	for i := have; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, migrations[i], pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, i+1, ts(s.now())); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
