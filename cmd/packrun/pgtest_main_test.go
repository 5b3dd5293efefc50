package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/packrun/packrun/internal/testing/pgtest"
)

// binDir holds the packrun binary the tests that run it as a process
// share (packrunBinary), removed when the tests end; srcDir is this
// package's directory (a test may change the working directory).
var binDir, srcDir string

// TestMain stops the PostgreSQL server pgtest.DSN starts for the tests
// that need one (store migrate, --store), and removes the shared binary.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "packrun-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "packrun tests:", err)
		os.Exit(1)
	}
	binDir = dir
	if srcDir, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, "packrun tests:", err)
		os.Exit(1)
	}
	pgtest.Main(m, func() { _ = os.RemoveAll(dir) })
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// packrunBinary builds this command once per test binary and returns its
// path: the tests that start serve or the CLI as a process share it (it
// is never written to; a test needing other link flags builds its own).
func packrunBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		bin := filepath.Join(binDir, "packrun")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		cmd.Dir = srcDir
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
			return
		}
		built = bin
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}
