package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// writeLogKey writes a log key file (64 hex digits of seed b), mode 0600.
func writeLogKey(t *testing.T, dir string, b byte) string {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	path := filepath.Join(dir, "log.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(seed)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Two nodes of one PostgreSQL cluster (their own homes and host keys,
// the cluster's secret key and $PACKRUN_LOG_KEY_FILE): `evidence
// checkpoint` on either prints a checkpoint under the one verifier key
// and origin; a bundle exported by one node, with the consistency proof
// from a checkpoint saved from the other, passes `evidence check`
// offline, and `evidence verify --checkpoint` on either node accepts a
// checkpoint saved from the other.
func TestEvidenceAcrossClusterNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	logKey := writeLogKey(t, dir, 3)
	t.Setenv("PACKRUN_STORE", dsn)
	t.Setenv("PACKRUN_LOG_KEY_FILE", logKey)
	a := homeCLI{t, filepath.Join(dir, "a")}
	installHello(t, a, dir)
	b := homeCLI{t, filepath.Join(dir, "b")}
	if err := os.MkdirAll(b.home, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"trust.json", "secret.key"} {
		data, err := os.ReadFile(filepath.Join(a.home, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.home, f), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	checkpoint := func(h homeCLI) logCheckpointJSON {
		t.Helper()
		var cp logCheckpointJSON
		if err := json.Unmarshal([]byte(h.ok("evidence", "checkpoint", "--json")), &cp); err != nil {
			t.Fatal(err)
		}
		if _, err := tlog.OpenCheckpoint([]byte(cp.Note), cp.VerifierKey); err != nil {
			t.Fatal(err)
		}
		return cp
	}
	attemptID(t, a, "invoke", "local.hello.c", "--input", `{"name":"a"}`)
	old := filepath.Join(dir, "a.checkpoint")
	a.ok("evidence", "checkpoint", "-o", old)
	fromA := checkpoint(a)
	second := attemptID(t, b, "invoke", "local.hello.c", "--input", `{"name":"b"}`)
	fromB := checkpoint(b)
	if fromA.VerifierKey != fromB.VerifierKey || fromB.Size <= fromA.Size {
		t.Fatalf("node a's checkpoint (size %d) is under %s, node b's (size %d) under %s: want one key",
			fromA.Size, fromA.VerifierKey, fromB.Size, fromB.VerifierKey)
	}
	pubA, _ := os.ReadFile(filepath.Join(a.home, "host.key"))
	pubB, _ := os.ReadFile(filepath.Join(b.home, "host.key"))
	if len(pubA) == 0 || string(pubA) == string(pubB) {
		t.Fatal("the two nodes share a host key: the test shows nothing")
	}
	bundle := filepath.Join(dir, "bundle.json")
	b.ok("evidence", "export", second, "-o", bundle, "--since-checkpoint", old)
	for _, h := range []homeCLI{a, b} {
		if out := h.ok("evidence", "verify", "--checkpoint", old); !strings.Contains(out, "evidence log consistent") {
			t.Fatalf("verify --checkpoint on %s: %q", h.home, out)
		}
	}
	t.Setenv("PACKRUN_STORE", "")
	t.Setenv("PACKRUN_LOG_KEY_FILE", "")
	auditor := homeCLI{t, filepath.Join(dir, "nowhere")}
	if out := auditor.ok("evidence", "check", bundle, "--checkpoint", old, "--key", fromA.VerifierKey); !strings.Contains(out, second) {
		t.Fatalf("evidence check: %q", out)
	}
}

// serve --log-key refuses a key file it cannot use, in one line naming
// the file, with the configuration exit code.
func TestServeLogKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, []byte(strings.Repeat("ab", 32)), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o644)
	h := homeCLI{t, filepath.Join(dir, "home")}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--log-key", filepath.Join(dir, "missing.key")}, filepath.Join(dir, "missing.key") + ": no such file"},
		{[]string{"--log-key", open}, open + ": mode 0644"},
		{[]string{"--log-origin", "cluster.example/log"}, "without a log key file"},
	} {
		code, _, errs := h.run(append([]string{"serve", "--addr", "127.0.0.1:0"}, c.args...)...)
		if code != exitConfig || !strings.Contains(errs, c.says) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("serve %v: exit %d %q; want %d saying %q in one line", c.args, code, errs, exitConfig, c.says)
		}
	}
}
