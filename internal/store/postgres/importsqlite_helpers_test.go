package postgres

import (
	"context"

	"github.com/packrun/packrun/internal/store/sqlite"
)

// SQLiteSource names a SQLite home's files, as packrun.MigrateStore does.
type SQLiteSource = sqlite.ExportFiles

// ImportSQLite copies the SQLite store src names into s through its
// export stream: what packrun.MigrateStore does, without the root.
func (s *Store) ImportSQLite(ctx context.Context, src SQLiteSource) (*ImportReport, error) {
	exp, err := sqlite.OpenExport(ctx, src)
	if err != nil {
		return nil, err
	}
	defer exp.Close()
	return s.Import(ctx, exp)
}
