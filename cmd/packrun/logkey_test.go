package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/evidence/witness"
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

// Two `packrun serve` nodes on one PostgreSQL database, given one
// --log-key and --log-origin and one --witness: the witness, which knows
// one log (one origin, one verifier key), cosigns the checkpoints of
// both nodes, each node proving consistency from what the witness holds
// whichever node sent it; entries written by a CLI given no log key are
// integrated by the nodes.
func TestServeLogKeyWitnessAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	bin := packrunBinary(t)
	t.Setenv("PACKRUN_STORE", dsn)
	admin := homeCLI{t, filepath.Join(dir, "admin")}
	installHello(t, admin, dir)
	logKey := writeLogKey(t, dir, 5)
	const origin = "cluster.example/packrun"
	seed, _ := hex.DecodeString(strings.Repeat("05", ed25519.SeedSize))
	signer, err := tlog.NewSigner(origin, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	vkey := signer.VerifierKey()

	tw := witnessOf(t, origin, vkey)

	var nodes []witnessedServe
	for _, name := range []string{"a", "b"} {
		home := filepath.Join(dir, name)
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"trust.json", "secret.key"} {
			data, err := os.ReadFile(filepath.Join(admin.home, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := startServeWith(t, bin, home, "--store", dsn, "--insecure-no-auth", "--runner-id", "node-"+name,
			"--log-key", logKey, "--log-origin", origin, "--witness", tw.flag())
		s.waitUp(t)
		m := servingOn.FindStringSubmatch(s.logs.String())
		if m == nil {
			t.Fatalf("no address in %q", s.logs.String())
		}
		nodes = append(nodes, witnessedServe{s, m[1]})
	}

	var target uint64
	for round := range 2 {
		attemptID(t, admin, "invoke", "local.hello.c", "--input", fmt.Sprintf(`{"name":"r%d"}`, round))
		// The CLI has no log key: the nodes integrate what it wrote.
		deadline := time.Now().Add(time.Minute)
		for {
			var cp logCheckpointJSON
			if err := json.Unmarshal([]byte(admin.ok("evidence", "checkpoint", "--json")), &cp); err != nil {
				t.Fatal(err)
			}
			if cp.VerifierKey != vkey {
				t.Fatalf("evidence checkpoint on a home given no log key: verifier key %s, want the cluster's %s", cp.VerifierKey, vkey)
			}
			if cp.Size > target {
				target = cp.Size
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the log stays at size %d", round, cp.Size)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for i, n := range nodes {
			n.waitFor(t, "/v1/evidence/checkpoint/cosigned", fmt.Sprintf("node %d cosigned", i), func(code int, body string) bool {
				if code != http.StatusOK {
					return false
				}
				var c struct {
					Checkpoint string `json:"checkpoint"`
				}
				if err := json.Unmarshal([]byte(body), &c); err != nil {
					t.Fatal(err)
				}
				size, _, err := witness.VerifyCosigned([]byte(c.Checkpoint), vkey, tw.w.Key().VKey())
				if err != nil {
					t.Fatalf("node %d's cosigned checkpoint: %v\n%s", i, err, c.Checkpoint)
				}
				return size >= target
			})
		}
	}
	for i, n := range nodes {
		req, _ := http.NewRequest(http.MethodGet, n.base+"/v1/evidence/checkpoint", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var cp logCheckpointJSON
		err = json.NewDecoder(resp.Body).Decode(&cp)
		resp.Body.Close()
		if err != nil || cp.VerifierKey != vkey {
			t.Fatalf("node %d: GET /v1/evidence/checkpoint: verifier key %q (%v), want %q", i, cp.VerifierKey, err, vkey)
		}
		if _, err := tlog.OpenCheckpoint([]byte(cp.Note), vkey); err != nil {
			t.Fatalf("node %d: GET /v1/evidence/checkpoint: %v", i, err)
		}
	}
	// A third node given another log key is refused at start.
	third := homeCLI{t, filepath.Join(dir, "c")}
	os.MkdirAll(third.home, 0o700)
	secret, _ := os.ReadFile(filepath.Join(admin.home, "secret.key"))
	os.WriteFile(filepath.Join(third.home, "secret.key"), secret, 0o600)
	otherDir := t.TempDir()
	other := writeLogKey(t, otherDir, 6)
	code, _, errs := third.run("serve", "--addr", "127.0.0.1:0", "--store", dsn, "--insecure-no-auth", "--log-key", other, "--log-origin", origin)
	if code != exitConfig || !strings.Contains(errs, other) || !strings.Contains(errs, vkey) {
		t.Fatalf("serve with another log key: exit %d %q; want %d naming %s and the log's key", code, errs, exitConfig, other)
	}
	if entries, err := os.ReadDir(tw.state); err != nil || len(entries) != 1 {
		t.Fatalf("the witness holds %d logs (%v), want one", len(entries), err)
	}
	for _, n := range nodes {
		n.stop(t)
	}
}
