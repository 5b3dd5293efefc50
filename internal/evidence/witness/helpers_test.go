package witness

import (
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
	"golang.org/x/mod/sumdb/note"
)

// testLog is an in-memory RFC 6962 log that signs its checkpoints.
type testLog struct {
	t      testing.TB
	origin string
	skey   string
	vkey   string
	signer note.Signer
	tree   *testonly.Tree
}

func newTestLog(t testing.TB, origin string) *testLog {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	return newTestLogWithKey(t, origin, skey, vkey)
}

func newTestLogWithKey(t testing.TB, origin, skey, vkey string) *testLog {
	t.Helper()
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return &testLog{t: t, origin: origin, skey: skey, vkey: vkey, signer: s, tree: testonly.New(rfc6962.DefaultHasher)}
}

// grow appends entries named by prefix until the log has size entries.
func (l *testLog) grow(size uint64, prefix string) *testLog {
	for l.tree.Size() < size {
		l.tree.AppendData(fmt.Appendf(nil, "%s entry %d", prefix, l.tree.Size()))
	}
	return l
}

// checkpoint is the log's signed checkpoint at size.
func (l *testLog) checkpoint(size uint64) []byte {
	l.t.Helper()
	cp := log.Checkpoint{Origin: l.origin, Size: size, Hash: l.tree.HashAt(size)}
	return l.sign(string(cp.Marshal()))
}

func (l *testLog) sign(text string) []byte {
	l.t.Helper()
	b, err := note.Sign(&note.Note{Text: text}, l.signer)
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

func (l *testLog) proof(from, to uint64) [][]byte {
	l.t.Helper()
	if from == 0 || from == to {
		return nil
	}
	p, err := l.tree.ConsistencyProof(from, to)
	if err != nil {
		l.t.Fatal(err)
	}
	return p
}

func (l *testLog) logConfig() Log {
	l.t.Helper()
	c, err := NewLog(l.origin, l.vkey)
	if err != nil {
		l.t.Fatal(err)
	}
	return c
}

func (l *testLog) body(old, size uint64) []byte {
	return AddRequest{OldSize: old, Proof: l.proof(old, size), Checkpoint: l.checkpoint(size)}.Marshal()
}

// newTestWitness is a witness with a fresh key and state directory.
func newTestWitness(t testing.TB, logs ...*testLog) (*Witness, string) {
	t.Helper()
	dir := t.TempDir()
	k, _, err := LoadOrCreateKey(filepath.Join(dir, "witness.key"), "test-witness")
	if err != nil {
		t.Fatal(err)
	}
	var cfg []Log
	for _, l := range logs {
		cfg = append(cfg, l.logConfig())
	}
	state := filepath.Join(dir, "state")
	w, err := New(k, cfg, state)
	if err != nil {
		t.Fatal(err)
	}
	return w, state
}
