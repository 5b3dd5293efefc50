package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"

	"github.com/packrun/packrun/internal/evidence/witness"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// witnessLog is a signed in-memory log for the witness command's tests.
type witnessLog struct {
	t      *testing.T
	origin string
	vkey   string
	signer note.Signer
	tree   *testonly.Tree
}

func newWitnessLog(t *testing.T, origin, prefix string, size int) *witnessLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	l := &witnessLog{t: t, origin: origin, vkey: vkey, signer: s, tree: testonly.New(rfc6962.DefaultHasher)}
	for i := 0; i < size; i++ {
		l.tree.AppendData(fmt.Appendf(nil, "%s %d", prefix, i))
	}
	return l
}

func (l *witnessLog) checkpoint(size uint64) []byte {
	l.t.Helper()
	cp := log.Checkpoint{Origin: l.origin, Size: size, Hash: l.tree.HashAt(size)}
	b, err := note.Sign(&note.Note{Text: string(cp.Marshal())}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

func (l *witnessLog) proof(from, to uint64) [][]byte {
	l.t.Helper()
	p, err := l.tree.ConsistencyProof(from, to)
	if err != nil {
		l.t.Fatal(err)
	}
	return p
}

// startWitness runs `packrun witness` in-process until the test ends, and
// returns its URL and the verifier key it printed.
func startWitness(t *testing.T, args ...string) (url, vkey string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb hosttest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"witness", "--listen", "127.0.0.1:0"}, args...), strings.NewReader(""), &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("witness: exit %d\n%s", code, errb.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errb.String(), "/add-checkpoint for") {
		if time.Now().After(deadline) {
			t.Fatalf("witness did not start: %s", errb.String())
		}
		select {
		case code := <-done:
			done <- code
			t.Fatalf("witness: exit %d: %s", code, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	rest, _ := strings.CutPrefix(errb.String()[strings.Index(errb.String(), "packrun witness on "):], "packrun witness on ")
	url, _, _ = strings.Cut(rest, witness.AddCheckpointPath)
	return url, strings.TrimSpace(out.String())
}

// TestWitnessCommand: `packrun witness` creates its key (0600), prints its
// verifier key, cosigns a log's checkpoints over HTTP as they grow (the
// cosignature verifies with the printed key), refuses a fork, and after a
// restart on the same key and state keeps both its key and what it
// cosigned.
func TestWitnessCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keyFile, state := filepath.Join(dir, "witness.key"), filepath.Join(dir, "state")
	l := newWitnessLog(t, "example.com/log", "a", 12)
	args := []string{"--key", keyFile, "--state", state, "--log", l.origin + "=" + l.vkey}

	url, vkey := startWitness(t, args...)
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	if !strings.HasPrefix(vkey, "packrun-witness+") {
		t.Fatalf("printed verifier key %q", vkey)
	}
	cosig, err := witness.AddCheckpoint(ctx, url, 0, nil, l.checkpoint(5))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := witness.VerifyCosignature(witness.AppendCosignature(l.checkpoint(5), cosig), vkey); err != nil {
		t.Fatal(err)
	}
	if _, err := witness.AddCheckpoint(ctx, url, 5, l.proof(5, 9), l.checkpoint(9)); err != nil {
		t.Fatal(err)
	}
	// A fork: the same log key signing another history.
	fork := &witnessLog{t: t, origin: l.origin, vkey: l.vkey, signer: l.signer, tree: newWitnessLog(t, l.origin, "b", 12).tree}
	_, err = witness.AddCheckpoint(ctx, url, 9, fork.proof(9, 12), fork.checkpoint(12))
	var refused *witness.RefusedError
	if !errors.As(err, &refused) || refused.Status != 422 {
		t.Fatalf("fork: %v", err)
	}

	// Another process on the same key and state: same key, same memory.
	url2, vkey2 := startWitness(t, args...)
	if vkey2 != vkey {
		t.Fatalf("restart printed %q, want %q", vkey2, vkey)
	}
	_, err = witness.AddCheckpoint(ctx, url2, 5, l.proof(5, 7), l.checkpoint(7))
	var conflict *witness.ConflictError
	if !errors.As(err, &conflict) || conflict.Size != 9 {
		t.Fatalf("rollback to 7 after restart: %v", err)
	}
}

// TestWitnessCommandErrors: bad flags are usage errors naming the flag; a
// key file others may read is refused; a busy address is unavailable.
func TestWitnessCommandErrors(t *testing.T) {
	dir := t.TempDir()
	l := newWitnessLog(t, "example.com/log", "a", 1)
	logFlag := l.origin + "=" + l.vkey
	open := filepath.Join(dir, "open.key")
	skey, _, _ := note.GenerateKey(rand.Reader, "w")
	if err := os.WriteFile(open, []byte(skey), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.key")
	if err := os.WriteFile(garbage, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	key, state := filepath.Join(dir, "k"), filepath.Join(dir, "s")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--key", key, "--state", state}, exitUsage, "--log ORIGIN=VKEY: at least one log"},
		{[]string{"--key", key, "--state", state, "--log", "example.com/log"}, exitUsage, "--log: log \"example.com/log\": want ORIGIN=VKEY"},
		{[]string{"--key", key, "--state", state, "--log", "example.com/log=bad"}, exitUsage, "verifier key \"bad\""},
		{[]string{"--state", state, "--log", logFlag}, exitUsage, "--key FILE: the witness's own key file is required"},
		{[]string{"--key", key, "--log", logFlag}, exitUsage, "--state DIR: the directory of the witness's state is required"},
		{[]string{"--key", open, "--state", state, "--log", logFlag}, exitOther, "lets others read it"},
		{[]string{"--key", garbage, "--state", state, "--log", logFlag}, exitOther, "garbage.key: witness key: malformed signer id"},
		{[]string{"--key", key, "--state", state, "--log", logFlag, "--listen", busy.Addr().String()}, exitUnavail, "address already in use"},
	} {
		code, _, errs := runCLI(t, append([]string{"witness"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 1 {
			t.Errorf("witness %v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}
