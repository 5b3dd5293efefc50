package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// servedHome prepares a home with the C hello pack installed (task type
// hello.c) and returns it with a freshly built packrun binary.
func servedHome(t *testing.T) (home, bin string) {
	t.Helper()
	bin = packrunBinary(t)
	return helloHome(t).home, bin
}

// homeStore opens home's host store for the test, closed when it ends.
func homeStore(t testing.TB, home string) host.Backend {
	t.Helper()
	h, err := packrun.Open(context.Background(), home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	return h.Store()
}

func enqueueN(t *testing.T, home string, n int) []string {
	t.Helper()
	ctx := context.Background()
	b := homeStore(t, home)
	ids := make([]string, n)
	for i := range n {
		rec, err := b.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "test", Payload: json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i))}, host.EnqueueOptions{MaxAttempts: 20})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = rec.TaskID
	}
	return ids
}

// served is a `packrun serve` process started by a test.
type served struct {
	*exec.Cmd
	logs *hosttest.SyncBuffer
}

func startServe(t *testing.T, bin, home string) served {
	t.Helper()
	return startServeWith(t, bin, home, "--insecure-no-auth")
}

// startServeWith starts serve on a free loopback port with these flags.
func startServeWith(t *testing.T, bin, home string, flags ...string) served {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--home", home, "serve", "--addr", "127.0.0.1:0"}, flags...)...)
	// Keep what serve says, to show it when the test fails.
	logs := &hosttest.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A serve the test left running (its own cleanups, run before
		// this one, stop those it means to stop) must not outlive it.
		if cmd.ProcessState == nil {
			cmd.Process.Signal(syscall.SIGCONT)
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("serve (pid %d) stderr:\n%s", cmd.Process.Pid, logs.String())
		}
	})
	return served{cmd, logs}
}

// waitUp waits until serve says it is serving, so that a signal sent next
// reaches its handler rather than a process still starting.
// baseURL is the address serve said it serves on (after waitUp).
func (s served) baseURL(t *testing.T) string {
	t.Helper()
	m := servingOn.FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatalf("serve has not said where it serves:\n%s", s.logs.String())
	}
	return m[1]
}

func (s served) waitUp(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.logs.String(), "packrun serving on") {
		if time.Now().After(deadline) {
			t.Fatal("serve did not come up")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitTerminal waits until every task is in a terminal state.
func waitTerminal(t *testing.T, home string, ids []string, limit time.Duration) map[string]*host.TaskRecord {
	t.Helper()
	ctx := context.Background()
	b := homeStore(t, home)
	deadline := time.Now().Add(limit)
	for {
		out := map[string]*host.TaskRecord{}
		done := 0
		for _, id := range ids {
			rec, err := b.Task(ctx, id)
			if err != nil {
				t.Fatalf("task %s lost: %v", id, err)
			}
			out[id] = rec
			if rec.Status.Terminal() {
				done++
			}
		}
		if done == len(ids) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tasks terminal after %s", done, len(ids), limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkRuns verifies every task completed, no completed task was run again,
// and the evidence chain verifies.
func checkRuns(t *testing.T, home string, tasks map[string]*host.TaskRecord) {
	t.Helper()
	ctx := context.Background()
	b := homeStore(t, home)
	for id, rec := range tasks {
		if rec.Status != host.TaskCompleted {
			t.Errorf("task %s ended %s: %s", id, rec.Status, rec.LastError)
			continue
		}
		atts, err := b.ListAttempts(ctx, host.AttemptFilter{TaskID: id, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range atts {
			if rec.FinishedAt != nil && a.StartedAt.After(*rec.FinishedAt) {
				t.Errorf("task %s ran again after it completed (attempt %s)", id, a.AttemptID)
			}
		}
	}
	r, err := b.VerifyChain(ctx)
	if err != nil || !r.OK {
		t.Fatalf("evidence verify: %v %+v", err, r.Broken)
	}
}

func TestServeSurvivesKill9(t *testing.T) {
	home, bin := servedHome(t)
	ids := enqueueN(t, home, 500)
	for i := 0; i < 5; i++ {
		cmd := startServe(t, bin, home)
		time.Sleep(time.Duration(150+rand.IntN(500)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
	}
	cmd := startServe(t, bin, home)
	cmd.waitUp(t)
	tasks := waitTerminal(t, home, ids, 2*time.Minute)
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
	checkRuns(t, home, tasks)
}

func TestTwoServesNeverRunATaskTwice(t *testing.T) {
	home, bin := servedHome(t)
	ids := enqueueN(t, home, 200)
	a, b := startServe(t, bin, home), startServe(t, bin, home)
	a.waitUp(t)
	b.waitUp(t)
	tasks := waitTerminal(t, home, ids, 2*time.Minute)
	for _, c := range []served{a, b} {
		c.Process.Signal(syscall.SIGTERM)
		if err := c.Wait(); err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	}
	checkRuns(t, home, tasks)
	ctx := context.Background()
	st := homeStore(t, home)
	for _, id := range ids {
		atts, _ := st.ListAttempts(ctx, host.AttemptFilter{TaskID: id})
		if len(atts) != 1 {
			t.Errorf("task %s has %d attempts, want 1", id, len(atts))
		}
	}
	_ = os.Getpid
}

// SIGTERM while serve is still starting up is a clean stop (exit 0).
func TestServeStopDuringStartup(t *testing.T) {
	home, bin := servedHome(t)
	enqueueN(t, home, 20)
	marker := filepath.Join(home, "packrun.db-memgen") // created when serve opens the store
	for i := range 3 {
		os.Remove(marker)
		cmd := startServe(t, bin, home)
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, err := os.Stat(marker); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("serve never opened the store")
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(i) * 5 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("round %d: serve stopped during start-up: %v", i, err)
		}
	}
}
