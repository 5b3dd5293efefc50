package hosttest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Getenv returns the environment variable name, or def when it is empty
// (for tools a test lets the caller override: CC, RUSTC, WAT2WASM).
func Getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// NeedCommand skips t with "<why>: <the lookup error>" unless the command
// name is installed.
func NeedCommand(t testing.TB, name, why string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s: %v", why, err)
	}
}

// Run runs cmd; a failure reports the command line and its output.
func Run(cmd *exec.Cmd) error {
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return nil
}

// Build calls build with the path of a file called name in a new temporary
// directory and returns what it wrote there. build may skip t (a missing
// toolchain); an error fails t.
func Build(t testing.TB, name string, build func(out string) error) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	if err := build(out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Rebuild builds the module committed at path again with Build and returns
// the rebuilt bytes and the committed ones.
func Rebuild(t testing.TB, committed string, build func(out string) error) (rebuilt, want []byte) {
	t.Helper()
	want, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	return Build(t, filepath.Base(committed), build), want
}

// CheckReproducible rebuilds the module committed at path and fails t
// unless it has the same bytes; fix says how to refresh a stale module.
func CheckReproducible(t testing.TB, committed, fix string, build func(out string) error) {
	t.Helper()
	rebuilt, want := Rebuild(t, committed, build)
	if !bytes.Equal(rebuilt, want) {
		t.Fatalf("%s is stale: rebuilding it from source gives different bytes (%d vs %d); %s", committed, len(rebuilt), len(want), fix)
	}
}
