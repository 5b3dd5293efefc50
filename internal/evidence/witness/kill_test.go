package witness

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a witness server (see TestMain): its
// value is the directory of its key and state, childLogEnv the log.
const (
	childEnv    = "PACKRUN_WITNESS_TEST_CHILD"
	childLogEnv = "PACKRUN_WITNESS_TEST_LOG"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(runChild(dir, os.Getenv(childLogEnv)))
	}
	os.Exit(m.Run())
}

// runChild serves a witness on 127.0.0.1 and prints its address, until killed.
func runChild(dir, logSpec string) int {
	l, err := ParseLog(logSpec)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	k, _, err := LoadOrCreateKey(filepath.Join(dir, "witness.key"), "kill-witness")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := New(k, []Log{l}, filepath.Join(dir, "state"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(ln.Addr().String())
	return func() int { fmt.Fprintln(os.Stderr, http.Serve(ln, w)); return 1 }()
}

func startChild(t *testing.T, dir string, l *testLog) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childLogEnv+"="+l.origin+"="+l.vkey)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) // ours, by pid
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("witness child: %v", err)
	}
	return cmd, "http://" + strings.TrimSpace(addr)
}

// TestKillNineKeepsState: a witness process killed with SIGKILL while
// checkpoints stream in keeps, on restart, at least the last checkpoint it
// answered for (its state is durable before the answer), and then refuses
// a rollback to an earlier checkpoint.
func TestKillNineKeepsState(t *testing.T) {
	const total = 2000
	l := newTestLog(t, "example.com/killed").grow(total, "a")
	dir := t.TempDir()
	cmd, url := startChild(t, dir, l)

	var acked atomic.Uint64 // the last size answered 200
	var sent atomic.Uint64  // the last size sent
	done := make(chan struct{})
	go func() {
		defer close(done)
		old := uint64(0)
		for size := uint64(1); size <= total; size++ {
			sent.Store(size)
			resp, err := http.Post(url+AddCheckpointPath, "text/plain", bytes.NewReader(l.body(old, size)))
			if err != nil {
				return // killed
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("size %d: %d", size, resp.StatusCode)
				return
			}
			acked.Store(size)
			old = size
		}
	}()
	for acked.Load() < 40 {
		select {
		case <-done:
			t.Fatalf("stream ended at %d before the kill", acked.Load())
		case <-time.After(time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	<-done
	// Whether a request was in flight at the kill is up to the scheduler;
	// what is checked holds either way.
	last, maxSent := acked.Load(), sent.Load()

	_, url = startChild(t, dir, l)
	// A 409 says what it holds: at least the last size it answered for.
	code, _, body := post(t, url, l.body(0, 1))
	held, err := strconv.ParseUint(strings.TrimSpace(body), 10, 64)
	if code != http.StatusConflict || err != nil || held < last || held > maxSent {
		t.Fatalf("after kill -9: %d %q; want 409 with a size in [%d, %d]", code, body, last, maxSent)
	}
	// Rollbacks to earlier checkpoints are refused...
	earlier := last - 10
	for _, req := range [][]byte{
		l.body(earlier, earlier),
		AddRequest{OldSize: held, Checkpoint: l.checkpoint(earlier)}.Marshal(),
	} {
		if code, _, body := post(t, url, req); code == http.StatusOK {
			t.Fatalf("rollback to %d cosigned: %q", earlier, body)
		}
	}
	// ...and the log's true extension is still cosigned.
	if code, _, body := post(t, url, l.body(held, total)); code != http.StatusOK {
		t.Fatalf("extension from %d: %d %s", held, code, body)
	}
}
