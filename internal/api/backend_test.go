package api

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/sqlite"
)

// newBackend returns the backend the tests run against: the real embedded
// store, in a fresh database.
func newBackend(t *testing.T) host.Backend {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "packrun.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// failingBackend is a backend whose ListTasks fails as a broken disk would.
type failingBackend struct {
	host.Backend
	err error
}

func (f failingBackend) ListTasks(context.Context, host.TaskFilter) ([]*host.TaskRecord, error) {
	return nil, f.err
}
