//go:build linux

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/packrun/packrun/host"
)

// prlimit sets another process's limit of resource (prlimit(2)).
func prlimit(pid, resource int, lim *syscall.Rlimit) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptr(unsafe.Pointer(lim)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// A running `packrun serve` whose disk fills up (its WAL may not grow: the
// process's RLIMIT_FSIZE, set from outside) refuses new tasks with 503 and
// Retry-After, stores nothing of them, and once there is room again takes
// tasks and runs them, with evidence that verifies — without a restart.
//
// Without a WAL reserve (--wal-reserve 0): a reserve gives the WAL room
// written ahead, which a full disk does not take back, so here the WAL
// must grow for every commit.
func TestServeThroughAFullDisk(t *testing.T) {
	home, bin := servedHome(t)
	s := startServeWith(t, bin, home, "--insecure-no-auth", "--wal-reserve", "0")
	s.waitUp(t)
	defer func() {
		s.Process.Signal(syscall.SIGTERM)
		s.Wait()
	}()
	m := regexp.MustCompile(`packrun serving on (http://\S+)`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatalf("no address in %q", s.logs.String())
	}
	base := m[1]
	post := func(name string) *http.Response {
		t.Helper()
		resp, err := http.Post(base+"/v1/tasks", "application/json", strings.NewReader(fmt.Sprintf(`{"task_type":"hello.c","payload":{"name":%q}}`, name)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	st, err := os.Stat(filepath.Join(home, "packrun.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	full := old
	full.Cur = uint64(st.Size())
	if err := prlimit(s.Process.Pid, syscall.RLIMIT_FSIZE, &full); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		resp := post(fmt.Sprintf("full-%d", i))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("enqueue on a full disk: %s, Retry-After %q", resp.Status, resp.Header.Get("Retry-After"))
		}
	}
	if err := prlimit(s.Process.Pid, syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}

	var ids []string
	deadline := time.Now().Add(30 * time.Second)
	for len(ids) < 10 {
		resp := post(fmt.Sprintf("after-%d", len(ids)))
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("enqueue once there is room: %s", resp.Status)
		}
		loc := resp.Header.Get("Location")
		ids = append(ids, strings.TrimPrefix(loc, "/v1/tasks/"))
		if time.Now().After(deadline) {
			t.Fatal("too slow")
		}
	}
	checkRuns(t, home, waitTerminal(t, home, ids, 30*time.Second))
	all, err := homeStore(t, home).ListTasks(context.Background(), host.TaskFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(ids) {
		t.Fatalf("%d tasks stored, want the %d accepted", len(all), len(ids))
	}
}
