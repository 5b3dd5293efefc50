package sqlite

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestWALReserve: the reserve writes the WAL with zeros up to its size
// while tasks are enqueued beside it, and a copy of the database and its
// WAL taken while the store is open (what a crash leaves) opens with
// every acknowledged task: no frame was overwritten by the zeros, and
// SQLite reads the zero tail as the WAL's end.
func TestWALReserve(t *testing.T) {
	// Larger than the frames the enqueues below can write (200 commits
	// at most, well under 64 KiB each), so the WAL's tail is the reserve's.
	const reserve = 32 << 20
	f := newFixture(t, Options{WALReserve: reserve})
	var wg sync.WaitGroup
	ids := make(chan string, 200)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				rec, err := f.Enqueue(ctx, intent("reserve", nil), host.EnqueueOptions{})
				if err != nil {
					t.Errorf("writer %d: %v", g, err)
					return
				}
				ids <- rec.TaskID
			}
		}()
	}
	rerr := f.AwaitWALReserve(ctx)
	wg.Wait()
	close(ids)
	if rerr != nil {
		t.Fatalf("reserve: %v", rerr)
	}
	wal := f.path + "-wal"
	fi, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() < reserve {
		t.Fatalf("WAL is %d bytes after the reserve, want at least %d", fi.Size(), reserve)
	}
	tail := make([]byte, 4096)
	if r, err := os.Open(wal); err != nil {
		t.Fatal(err)
	} else {
		_, err = r.ReadAt(tail, fi.Size()-int64(len(tail)))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("the WAL's last page is not the reserve's zeros")
	}

	// Every file of the home but the WAL's shared-memory index, which
	// SQLite then rebuilds from the WAL itself, as after a crash.
	dir := t.TempDir()
	crash := filepath.Join(dir, filepath.Base(f.path))
	files, err := os.ReadDir(filepath.Dir(f.path))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range files {
		if e.Type().IsRegular() && !strings.HasSuffix(e.Name(), "-shm") {
			copyFile(t, filepath.Join(filepath.Dir(f.path), e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	s, err := Open(ctx, crash, Options{})
	if err != nil {
		t.Fatalf("open the copy: %v", err)
	}
	defer s.Close()
	for id := range ids {
		if _, err := s.Task(ctx, id); err != nil {
			t.Errorf("task %s acknowledged but not in the copy: %v", id, err)
		}
	}
	if _, err := s.Enqueue(ctx, intent("after", nil), host.EnqueueOptions{}); err != nil {
		t.Fatalf("the copy takes no write: %v", err)
	}
}

// TestWALReserveStopsAtClose: a store closed while its reserve is being
// written closes (the reserve stops between chunks), and its database
// opens again.
func TestWALReserveStopsAtClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "packrun.db")
	s, err := Open(ctx, path, Options{WALReserve: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, s, intent("x", nil), host.EnqueueOptions{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if l, err := s.ListTasks(ctx, host.TaskFilter{}); err != nil || len(l) != 1 {
		t.Fatalf("tasks after reopening: %d, %v", len(l), err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	r, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, r); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}
