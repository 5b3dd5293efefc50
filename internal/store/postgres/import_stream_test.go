package postgres

import (
	"context"
	"errors"
	"iter"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storemove"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// failingRows is a source whose rows of one table fail after the first.
type failingRows struct {
	storemove.Source
	table string
	err   error
}

func (f failingRows) Rows(ctx context.Context, t storemove.Table) iter.Seq2[[]any, error] {
	rows := f.Source.Rows(ctx, t)
	if t.Name != f.table {
		return rows
	}
	return func(yield func([]any, error) bool) {
		for row, err := range rows {
			if err != nil || !yield(row, nil) {
				return
			}
			yield(nil, f.err)
			return
		}
	}
}

// Import reads through the stream only: a read that fails midway is
// returned as it is and leaves this store empty, so the same stream
// read again goes through.
func TestImportStreamReadFails(t *testing.T) {
	dsn := pgtest.DSN(t)
	h := newSQLiteHome(t)
	for range 2 {
		if _, err := h.Enqueue(ctx, intent("work", 0), host.EnqueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h.Close()
	s := openWithKey(t, dsn, h.key)
	exp, err := sqlite.OpenExport(ctx, h.src)
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	boom := errors.New("disk gone")
	if _, err := s.Import(ctx, failingRows{exp, "tasks", boom}); !errors.Is(err, boom) {
		t.Fatalf("a failing read: %v", err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tasks after the failed copy (%v)", n, err)
	}
	rep, err := s.Import(ctx, exp)
	if err != nil || !rep.Chain.OK {
		t.Fatalf("the copy again: %+v %v", rep, err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM tasks`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d tasks copied (%v)", n, err)
	}
}
