//go:build linux

package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// TestFullDiskAppliesNothing: when the disk fills up under the writer
// (here RLIMIT_FSIZE stops the WAL from growing: its writes fail with
// EFBIG, as they would with ENOSPC), every write caught in it fails with an
// error and leaves no trace, everything acknowledged before is intact, the
// chain verifies, and once there is room again the same store writes as
// before, without being reopened.
//
// With no room at all every write of the round fails; with a little room
// the first commits fit and the later ones do not.
func TestFullDiskAppliesNothing(t *testing.T) {
	for _, room := range []int64{0, 512 << 10} {
		t.Run(fmt.Sprintf("room=%d", room), func(t *testing.T) { testFullDisk(t, room) })
	}
}

func testFullDisk(t *testing.T, room int64) {
	// Small batches, so that with some room a few commits fit.
	f := newFixture(t, Options{MaxBatchOps: 8})
	seedEvidence(t, f)
	before, err := f.VerifyChain(ctx)
	if err != nil || !before.OK {
		t.Fatalf("%+v %v", before, err)
	}
	sc := host.Scope{Tenant: "acme", Namespace: "notes"}

	// Writes of every kind, from many callers at once so that they share
	// batches: attempts (with their chained events), tasks, memory, events.
	type write struct {
		kind, id string // "attempt", "task", "memory" or "event", and its name
		do       func() error
		err      error
	}
	writes := func(round string, n int) []*write {
		var ws []*write
		for i := range n {
			id := fmt.Sprintf("att-%s-%d", round, i)
			key := fmt.Sprintf("%s-%d", round, i)
			ws = append(ws,
				&write{kind: "attempt", id: id, do: func() error {
					return f.RecordAttempt(ctx, &host.Attempt{AttemptID: id, Pack: "local.demo@1.0.0", Node: "demo.node", Outcome: abi.Completed,
						Input: json.RawMessage(`{"i":1}`), Trace: json.RawMessage(`[{"fn":"openwop_log"}]`)})
				}},
				&write{kind: "task", id: key, do: func() error {
					_, err := f.Enqueue(ctx, host.TaskIntent{TaskType: "full", Source: "test", Subject: key, Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
					return err
				}},
				&write{kind: "memory", id: key, do: func() error {
					return f.Put(ctx, sc, key, json.RawMessage(`{"pad":"`+strings.Repeat("x", 1000)+`"}`), host.PutOptions{})
				}},
				&write{kind: "event", id: key, do: func() error {
					_, err := f.AppendEvent(ctx, host.Event{Type: "custom.full", Data: json.RawMessage(`{"k":"` + key + `"}`)})
					return err
				}},
			)
		}
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() { w.err = w.do() })
		}
		wg.Wait()
		return ws
	}

	// Fill the disk: the WAL may not grow past its current size.
	st, err := os.Stat(f.path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ) // the write fails with EFBIG instead of killing the process
	defer signal.Reset(syscall.SIGXFSZ)
	full := old
	full.Cur = uint64(st.Size() + room)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	failed := writes("full", 50)
	restore()

	nFailed := 0
	for _, w := range failed {
		if w.err != nil {
			nFailed++
			if !errors.Is(w.err, host.ErrUnavailable) || !host.Retryable(w.err) || !strings.Contains(w.err.Error(), "no space left for the database") {
				t.Errorf("%s %s: %v; want an ErrUnavailable saying there is no space", w.kind, w.id, w.err)
			}
		}
	}
	if nFailed == 0 {
		t.Fatal("no write failed with the WAL unable to grow: the test did not fill the disk")
	}
	if room == 0 && nFailed != len(failed) {
		t.Fatalf("%d of %d writes succeeded with no room at all", len(failed)-nFailed, len(failed))
	}
	if room > 0 && nFailed == len(failed) {
		t.Fatalf("no write fitted in %d bytes of room", room)
	}
	t.Logf("%d of %d writes failed; first: %v", nFailed, len(failed), firstErr(failed, func(w *write) error { return w.err }))

	// Room again: the same store writes as before.
	for _, w := range writes("after", 5) {
		if w.err != nil {
			t.Fatalf("%s %s after the disk has room again: %v", w.kind, w.id, w.err)
		}
	}

	// A failed write left nothing; an acknowledged one is all there.
	tasks, err := f.ListTasks(ctx, host.TaskFilter{TaskType: "full", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	subjects := map[string]bool{}
	for _, rec := range tasks {
		subjects[rec.Subject] = true
	}
	evs, err := f.Events(ctx, host.EventFilter{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	noted := map[string]bool{} // data of the custom.full events
	for _, e := range evs {
		if e.Type == "custom.full" {
			noted[string(e.Data)] = true
		}
	}
	for _, w := range failed {
		var present bool
		id := w.id
		switch w.kind {
		case "attempt":
			_, err := f.Attempt(ctx, id)
			if err != nil && !errors.Is(err, host.ErrNotFound) {
				t.Fatal(err)
			}
			present = err == nil
		case "task":
			present = subjects[id]
		case "memory":
			_, err := f.Get(ctx, sc, id)
			if err != nil && !errors.Is(err, host.ErrNotFound) {
				t.Fatal(err)
			}
			present = err == nil
		case "event":
			present = noted[`{"k":"`+id+`"}`]
		}
		if present != (w.err == nil) {
			t.Errorf("%s %s: error %v, but present in the store = %v", w.kind, w.id, w.err, present)
		}
	}
	after, err := f.VerifyChain(ctx)
	if err != nil || !after.OK {
		t.Fatalf("chain after the full disk: %+v %v", after, err)
	}
	if after.Events <= before.Events {
		t.Fatalf("events %d after, %d before", after.Events, before.Events)
	}
}

func firstErr[T any](xs []T, errOf func(T) error) error {
	for _, x := range xs {
		if err := errOf(x); err != nil {
			return err
		}
	}
	return nil
}
