//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// memory put --secret: the operator reads the value back with memory get,
// the home is the owner's alone and the database holds the value sealed;
// PACKRUN_SECRET_KEY_FILE moves the key out of the home, and without it
// get says which key file is missing.
func TestMemorySecretCLI(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	const secret = `"sk-cli-5e3a91-plaintext"`
	mem := func(args ...string) []string { return append([]string{"memory", "--namespace", "creds"}, args...) }

	h.ok(mem("put", "token", secret, "--secret")...)
	if out := h.ok(mem("get", "token")...); out != secret+"\n" {
		t.Fatalf("get: %q", out)
	}
	if out := h.ok(mem("list")...); out != "token\n" {
		t.Fatalf("list: %q", out)
	}
	for p, want := range map[string]os.FileMode{
		h.home:                                  0o700,
		filepath.Join(h.home, "packrun.db"):     0o600,
		filepath.Join(h.home, "secret.key"):     0o600,
		filepath.Join(h.home, "packrun.db-wal"): 0o600, // if left
	} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(p, "-wal") {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != want {
			t.Errorf("%s: mode %o, want %o", filepath.Base(p), m, want)
		}
	}
	for _, p := range []string{"packrun.db", "packrun.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(h.home, p))
		if bytes.Contains(b, []byte("sk-cli-5e3a91")) {
			t.Fatalf("%s holds the secret in plaintext", p)
		}
	}

	// The key elsewhere.
	keyDir := filepath.Join(dir, "keys")
	os.Mkdir(keyDir, 0o700)
	keyFile := filepath.Join(keyDir, "packrun.key")
	t.Setenv("PACKRUN_SECRET_KEY_FILE", keyFile)
	h2 := homeCLI{t, filepath.Join(dir, "home2")}
	h2.ok(mem("put", "token", secret, "--secret")...)
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if _, err := os.Stat(filepath.Join(h2.home, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a key file in the home too: %v", err)
	}
	if out := h2.ok(mem("get", "token")...); out != secret+"\n" {
		t.Fatalf("get: %q", out)
	}
	t.Setenv("PACKRUN_SECRET_KEY_FILE", "")
	code, out, errs := h2.run(mem("get", "token")...)
	if code != 1 || out != "" || !strings.Contains(errs, filepath.Join(h2.home, "secret.key")+" does not exist") || !strings.Contains(errs, "PACKRUN_SECRET_KEY_FILE") {
		t.Fatalf("get without the key file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
