package storetest

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// LogKeyOpener opens one more store (a node) on the test's one
// database, its log's checkpoints signed by signer (nil: the store's
// default, its host key), and closes it when t ends; the error is
// Open's.
type LogKeyOpener func(t testing.TB, signer *tlog.Signer) (host.Backend, error)

// NewLogSigner is a log key for tests: an Ed25519 key from seed under
// origin.
func NewLogSigner(t testing.TB, origin string, seed byte) *tlog.Signer {
	t.Helper()
	s, err := tlog.NewSigner(origin, ed25519.NewKeyFromSeed(bytesOf(seed, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bytesOf(b byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = b
	}
	return out
}

// LogKey checks the log key rule: stores given one log key sign every
// checkpoint of their shared log with it, under its one origin, whichever
// integrated; the first checkpoint signed records the key, a store given
// another is refused as it opens (storecore.ErrLogKey) or, if it opened
// before the key was recorded, integrates nothing and its LogSync says
// why (ErrLogKey again), and a store given none integrates nothing (the key's holders do) and reports the
// recorded key as the log's verifier key.
func LogKey(t *testing.T, open LogKeyOpener) {
	key := NewLogSigner(t, "cluster.example/log", 1)
	other := NewLogSigner(t, "cluster.example/log", 2)
	mustOpen := func(signer *tlog.Signer) host.Backend {
		t.Helper()
		b, err := open(t, signer)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	appendN := func(b host.Backend, prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	syncLog := func(b host.Backend) *host.LogCheckpoint {
		t.Helper()
		cp, err := b.LogSync(ctx)
		if err != nil {
			t.Fatalf("LogSync: %v", err)
		}
		return cp
	}

	// Two keys opened before either recorded one (a race the check at
	// Open cannot close): the first to sign records its key, whichever
	// it is; the other, already open, integrates nothing and says why
	// (ErrLogKey).
	a := mustOpen(key)
	early := mustOpen(other)
	appendN(a, "a", 2)
	appendN(early, "e", 1)
	_, _ = a.LogSync(ctx) // one of the two may say ErrLogKey: the race's
	_, _ = early.LogSync(ctx)
	reader := mustOpen(nil)
	recorded, err := reader.LogVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	winner, loser := a, early
	if recorded == other.VerifierKey() {
		key, other = other, key
		winner, loser = early, a
	}
	if recorded != key.VerifierKey() {
		t.Fatalf("two log keys on one log: %s recorded, neither's", recorded)
	}
	winner.Close() // no sequencer but the loser's is left to integrate
	appendN(loser, "l", 1)
	if cp, err := loser.LogSync(ctx); !errors.Is(err, storecore.ErrLogKey) {
		t.Fatalf("LogSync of a store given another key than the recorded one: %+v, %v", cp, err)
	}
	loser.Close()
	first := ChainHashes(t, reader)
	reader.Close()
	firstSize := uint64(len(first))

	a = mustOpen(key)
	if cp := syncLog(a); cp.Size != firstSize {
		t.Fatalf("log size %d once the key's holder opened again, want %d", cp.Size, firstSize)
	}
	b := mustOpen(key)
	appendN(b, "b", 2)
	if cp := syncLog(b); cp.Size != firstSize+2 {
		t.Fatalf("log size %d after both nodes appended, want %d", cp.Size, firstSize+2)
	}
	hashes := ChainHashes(t, b)
	for _, n := range []host.Backend{a, b} {
		if vkey, err := n.LogVerifierKey(); err != nil || vkey != key.VerifierKey() {
			t.Fatalf("LogVerifierKey: %q, %v; want the log key's %q", vkey, err, key.VerifierKey())
		}
		CheckLog(t, n, hashes, []uint64{firstSize})
	}

	// Another key on the same log: refused as the store opens, by name.
	_, err = open(t, other)
	if !errors.Is(err, storecore.ErrLogKey) {
		t.Fatalf("a store given another log key opened: %v", err)
	}
	if want := other.VerifierKey(); err == nil || !strings.Contains(err.Error(), key.VerifierKey()) || !strings.Contains(err.Error(), want) {
		t.Fatalf("the refusal names neither key: %v", err)
	}

	// A store given no log key: it reads the log, signs nothing.
	a.Close()
	b.Close()
	c := mustOpen(nil)
	if vkey, err := c.LogVerifierKey(); err != nil || vkey != key.VerifierKey() {
		t.Fatalf("LogVerifierKey of a store given no log key: %q, %v; want the recorded %q", vkey, err, key.VerifierKey())
	}
	appendN(c, "c", 2)
	if cp := syncLog(c); cp.Size != firstSize+2 {
		t.Fatalf("a store given no log key integrated: log size %d, want %d", cp.Size, firstSize+2)
	}
	c.Close()
	// The key's holder integrates what it appended, under the same key.
	d := mustOpen(key)
	CheckLog(t, d, ChainHashes(t, d), []uint64{firstSize, firstSize + 2})
}
