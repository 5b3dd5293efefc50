package postgres

import (
	"database/sql"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storetest"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// eventTenantMigration is the number of the migration that added
// runtime_events.tenant.
func eventTenantMigration(t *testing.T) int {
	t.Helper()
	i := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "ALTER TABLE runtime_events ADD COLUMN tenant") })
	if i < 0 {
		t.Fatal("no migration adds runtime_events.tenant")
	}
	return i + 1
}

// The migration that added each event's tenant fills it for the events
// stored before, by the rule the store applies as it appends one: with
// the column dropped and the migration applied again by the next node to
// open the database, each tenant lists what it listed, and the chain
// verifies (the tenant is not hashed).
func TestMigrationFillsEventTenants(t *testing.T) {
	dsn := pgtest.DSN(t)
	clock := storetest.NewClock()
	s, err := Open(ctx, dsn, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SeedTenantEvents(t, s, clock)
	before := storetest.CheckTenantEvents(t, s)
	for _, q := range []string{`DROP INDEX runtime_events_tenant`, `ALTER TABLE runtime_events DROP COLUMN tenant`} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// It and the ones after it are applied again (those apply over
	// themselves).
	if _, err := s.pool.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= $1`, eventTenantMigration(t)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, dsn, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if after := storetest.CheckTenantEvents(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("after the migration the tenants list %v, before %v", after, before)
	}
	if rep, err := s.VerifyChain(ctx); err != nil || !rep.OK {
		t.Fatalf("chain after the migration: %+v %v", rep, err)
	}
	// Still append-only.
	if _, err := s.pool.Exec(ctx, `UPDATE runtime_events SET tenant = 'x'`); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("an update of runtime_events after the migration: %v", err)
	}
}

// A copy of a SQLite store carries each event's tenant; from a store
// older than the column, the copy works it out as the migration does.
func TestImportSQLiteEventTenants(t *testing.T) {
	for _, old := range []bool{false, true} {
		name := map[bool]string{false: "current", true: "before the column"}[old]
		t.Run(name, func(t *testing.T) {
			clock := storetest.NewClock()
			dir := t.TempDir()
			src := SQLiteSource{DB: filepath.Join(dir, "packrun.db"), PackBlobDir: filepath.Join(dir, "blobs", "sha256"), ArtifactDir: filepath.Join(dir, "artifacts", "sha256")}
			h, err := sqlite.Open(ctx, src.DB, sqlite.Options{Now: clock.Now, BlobDir: src.ArtifactDir, PackBlobDir: src.PackBlobDir})
			if err != nil {
				t.Fatal(err)
			}
			storetest.SeedTenantEvents(t, h, clock)
			want := storetest.CheckTenantEvents(t, h)
			if err := h.Close(); err != nil {
				t.Fatal(err)
			}
			if old {
				db, err := sql.Open("sqlite3", src.DB)
				if err != nil {
					t.Fatal(err)
				}
				for _, q := range []string{`DROP INDEX runtime_events_tenant`, `ALTER TABLE runtime_events DROP COLUMN tenant`} {
					if _, err := db.Exec(q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				db.Close()
			}
			s, err := Open(ctx, pgtest.DSN(t), Options{Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if rep, err := s.ImportSQLite(ctx, src); err != nil || !rep.Chain.OK {
				t.Fatalf("import: %+v %v", rep, err)
			}
			if got := storetest.CheckTenantEvents(t, s); !reflect.DeepEqual(got, want) {
				t.Fatalf("after the copy the tenants list %v, in the home %v", got, want)
			}
		})
	}
}
