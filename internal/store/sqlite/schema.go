package sqlite

import (
	"embed"

	"github.com/packrun/packrun/internal/store/storecore"
)

// migrations of the host's tables, one file each in migrations/
// (NNNN_summary.sql, numbered without a gap): append only, never edit a
// published one.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrations = storecore.MustMigrations(migrationFiles, "migrations")
