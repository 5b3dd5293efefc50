package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

func TestMigrateOnceInOrder(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	migs := []string{`CREATE TABLE a (x INTEGER)`, `ALTER TABLE a ADD COLUMN y TEXT`}
	for i := 0; i < 2; i++ { // reopening applies nothing twice
		d, err := openDB(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if err := migrateDB(ctx, d, "test", migs); err != nil {
			t.Fatal(err)
		}
		var n int
		d.QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE component = 'test'`).Scan(&n)
		if n != 2 {
			t.Fatalf("recorded %d migrations", n)
		}
		var mode string
		d.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
		if mode != "wal" {
			t.Fatalf("journal mode %s", mode)
		}
		d.Close()
	}
	d, _ := openDB(ctx, path)
	defer d.Close()
	if err := migrateDB(ctx, d, "test", append(migs, `THIS IS NOT SQL`)); err == nil {
		t.Fatal("bad migration accepted")
	}
	var n int
	d.QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE component = 'test'`).Scan(&n)
	if n != 2 {
		t.Fatalf("failed migration recorded: %d", n)
	}
}
