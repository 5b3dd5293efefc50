package packrun

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/evidence/witness"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// writeLogKey writes a log key file (seed b repeated), mode 0600.
func writeLogKey(t *testing.T, b byte) string {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b
	}
	path := filepath.Join(t.TempDir(), "log.key")
	if err := os.WriteFile(path, []byte(hex.EncodeToString(seed)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A log key file that is missing, too open, of the wrong kind or not a
// file, and an origin without a key or not a valid name, are refused
// with one line naming the file (or origin) at fault; nothing is made.
func TestLogKeyFileRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := writeLogKey(t, 7)
	for _, c := range []struct {
		name, file, origin, says string
	}{
		{"missing", filepath.Join(dir, "nope.key"), "", "no such file"},
		{"group readable", write("open.key", strings.Repeat("ab", 32), 0o640), "", "mode 0640 lets others read it"},
		{"world readable", write("world.key", strings.Repeat("ab", 32), 0o644), "", "mode 0644"},
		{"not hex", write("pem.key", "-----BEGIN PRIVATE KEY-----\n", 0o600), "", "not a packrun log key"},
		{"too short", write("short.key", strings.Repeat("ab", 16), 0o600), "", "want 64 hex digits"},
		{"a verifier key", write("vkey.key", "example.com/log+01234567+AQIDBA==", 0o600), "", "not a packrun log key"},
		{"a directory", dir, "", "not a regular file"},
		{"origin with a space", good, "my log", "origin"},
		{"origin without a key", "", "cluster.example/log", "without a log key file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			_, err := Open(ctx, home, Config{LogKeyFile: c.file, LogOrigin: c.origin})
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("Open: %v; want one line of ErrConfig saying %q", err, c.says)
			}
			if c.file != "" && !strings.Contains(err.Error(), c.file) && c.origin == "" {
				t.Fatalf("the refusal does not name %s: %v", c.file, err)
			}
			if _, err := os.Stat(filepath.Join(home, "packrun.db")); err == nil {
				t.Fatal("a refused Open made a store")
			}
		})
	}
}

// openClusterNode opens a node of the cluster on dsn: its own home and
// host key, the cluster's secret key and the log key file logKey.
func openClusterNode(t *testing.T, dsn, secretFile, logKey, origin string) (*Host, error) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	h, err := Open(ctx, home, Config{Store: dsn, SecretKeyFile: secretFile, LogKeyFile: logKey, LogOrigin: origin})
	if err == nil {
		t.Cleanup(func() { h.Close(ctx) })
	}
	return h, err
}

// Three nodes of one PostgreSQL cluster, each with its own home and host
// key, given one log key file: entries appended through every node, the
// checkpoints each node integrated open with one verifier key under one
// origin, every proof between them verifies, and a witness cosigns the
// checkpoints of one node after those of another. A node given another
// log key is refused, naming its file and both keys; a node given none
// reads the cluster's verifier key and signs nothing.
func TestLogKeyAcrossPostgresNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	secret := filepath.Join(t.TempDir(), "secret.key")
	logKey := writeLogKey(t, 1)
	const origin = "cluster.example/packrun"
	var nodes []*Host
	for range 3 {
		h, err := openClusterNode(t, dsn, secret, logKey, origin)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, h)
	}
	vkey, err := nodes[0].LogVerifierKey()
	if err != nil || !strings.HasPrefix(vkey, origin+"+") {
		t.Fatalf("LogVerifierKey: %q, %v; want one under %s", vkey, err, origin)
	}
	hostKeys := map[string]bool{}
	for _, h := range nodes {
		pub, err := h.store.HostPublicKey()
		if err != nil {
			t.Fatal(err)
		}
		hostKeys[pub] = true
	}
	if len(hostKeys) != 3 {
		t.Fatalf("the nodes share host keys: %v", hostKeys)
	}

	wkey, _, err := witness.LoadOrCreateKey(filepath.Join(t.TempDir(), "witness.key"), "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	wlog, err := witness.NewLog(origin, vkey)
	if err != nil {
		t.Fatal(err)
	}
	w, err := witness.New(wkey, []witness.Log{wlog}, filepath.Join(t.TempDir(), "witness-state"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(w)
	t.Cleanup(srv.Close)

	var cosigned uint64 // the size the witness holds
	for round := range 2 {
		for i, h := range nodes {
			if _, err := h.Store().AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: "node-" + string(rune('a'+i))}); err != nil {
				t.Fatal(err)
			}
			cp, err := h.EvidenceLog().LogSync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := h.LogVerifierKey(); err != nil || got != vkey {
				t.Fatalf("node %d: LogVerifierKey %q, %v; want %q", i, got, err, vkey)
			}
			opened, err := tlog.OpenCheckpoint([]byte(cp.Note), vkey)
			if err != nil {
				t.Fatalf("round %d, node %d: its checkpoint of size %d: %v", round, i, cp.Size, err)
			}
			if opened.Origin != origin {
				t.Fatalf("node %d: origin %q, want %q", i, opened.Origin, origin)
			}
			var proof [][]byte
			if cosigned > 0 {
				cb, err := h.LogConsistency(ctx, cosigned, cp.Size)
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := tlog.CheckConsistency([]byte(cb.Old), []byte(cb.New), cb.Proof, vkey); err != nil {
					t.Fatalf("node %d: consistency %d..%d: %v", i, cosigned, cp.Size, err)
				}
				proof = cb.Proof
			}
			cosig, err := witness.AddCheckpoint(ctx, srv.URL, cosigned, proof, []byte(cp.Note))
			if err != nil {
				t.Fatalf("round %d, node %d: the witness refused the checkpoint of size %d: %v", round, i, cp.Size, err)
			}
			if _, _, err := witness.VerifyCosigned(witness.AppendCosignature([]byte(cp.Note), cosig), vkey, wkey.VKey()); err != nil {
				t.Fatal(err)
			}
			cosigned = cp.Size
		}
	}
	if cosigned != 6 {
		t.Fatalf("the witness cosigned up to size %d, want 6", cosigned)
	}

	// Another log key on the same database: refused, naming the file.
	other := writeLogKey(t, 2)
	_, err = openClusterNode(t, dsn, secret, other, origin)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), storecore.ErrLogKey.Error()) {
		t.Fatalf("a node given another log key: %v", err)
	}
	if !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), vkey) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the refusal does not name %s and the log's key in one line: %v", other, err)
	}

	// No log key: the node reads the cluster's key and signs nothing.
	bare, err := openClusterNode(t, dsn, secret, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := bare.LogVerifierKey(); err != nil || got != vkey {
		t.Fatalf("a node given no log key: LogVerifierKey %q, %v; want the cluster's %q", got, err, vkey)
	}
	cp, err := bare.LogCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlog.OpenCheckpoint([]byte(cp.Note), vkey); err != nil {
		t.Fatalf("the checkpoint a node given no log key serves: %v", err)
	}
}

// FuzzParseLogKey: a log key file's bytes decode to a key only when they
// are 64 hex digits (white space around them allowed), and the key is
// the seed they spell; anything else is one line saying what is wanted.
func FuzzParseLogKey(f *testing.F) {
	for _, s := range []string{strings.Repeat("ab", 32), strings.Repeat("AB", 32) + "\n", " " + strings.Repeat("01", 32) + " \r\n",
		strings.Repeat("ab", 31), strings.Repeat("ab", 33), "PRIVATE+KEY+example.com+01234567+AQID", "", "\x00\xff", strings.Repeat("zz", 32)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		key, err := parseLogKey(b)
		if err != nil {
			if key != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%q: key %x with error %q", b, key, err)
			}
			return
		}
		seed, herr := hex.DecodeString(strings.TrimSpace(string(b)))
		if herr != nil || len(seed) != ed25519.SeedSize || !bytes.Equal(key.Seed(), seed) {
			t.Fatalf("%q decoded to the key of seed %x", b, key.Seed())
		}
	})
}
