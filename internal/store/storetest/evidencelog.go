package storetest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// EvidenceLog checks the Merkle log over the evidence chain (issue 33):
// its root against a tree built independently from the chain hashes,
// inclusion proofs of every entry at every checkpointed size,
// consistency proofs between checkpoints, signed checkpoint notes, and
// entries appended concurrently integrated exactly once.
func EvidenceLog(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"LogMatchesChain", evidenceLogMatchesChain},
		{"LogConcurrentAppends", evidenceLogConcurrent},
		{"LogBadInput", evidenceLogBadInput},
	})
}

// appendMixed appends n chain entries of each kind (events, attempts).
func (f *fixture) appendMixed(prefix string, n int) {
	f.t.Helper()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if _, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: id}); err != nil {
			f.t.Fatal(err)
		}
		if err := f.b.RecordAttempt(ctx, &host.Attempt{AttemptID: id, TaskID: id, Outcome: abi.Completed}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// LogTreeOf builds the log's tree independently from the chain entries'
// hashes (hex, seq order) in memory, returning its tiles and root.
func LogTreeOf(t testing.TB, hashes []string) (*tlog.MemoryTiles, []byte) {
	t.Helper()
	leaves := make([][]byte, len(hashes))
	for i, h := range hashes {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != tlog.HashSize {
			t.Fatalf("chain entry %d: hash %q", i+1, h)
		}
		leaves[i] = tlog.LeafHash(b)
	}
	mt := tlog.NewMemoryTiles()
	in, err := tlog.Integrate(ctx, mt, 0, leaves)
	if err != nil {
		t.Fatal(err)
	}
	if err := mt.Write(in.Tiles); err != nil {
		t.Fatal(err)
	}
	return mt, in.Root
}

func chainHashes(evs []*host.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Hash
	}
	return out
}

// ChainHashes is the chain hashes of every entry of b's chain, in seq
// order.
func ChainHashes(t testing.TB, b host.Backend) []string {
	t.Helper()
	evs, err := b.Events(ctx, host.EventFilter{Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d is number %d in the chain", e.Seq, i+1)
		}
	}
	return chainHashes(evs)
}

// CheckLog integrates what is pending (LogSync) and checks the log
// against the chain whose entries' hashes are hashes: the root against a
// tree built independently, the signed note of the newest checkpoint
// and of each of sizes, inclusion proofs of every entry in each, and
// consistency proofs between them. It returns the newest checkpoint.
func CheckLog(t testing.TB, b host.Backend, hashes []string, sizes []uint64) *host.LogCheckpoint {
	t.Helper()
	cp, err := b.LogSync(ctx)
	if err != nil {
		t.Fatalf("LogSync: %v", err)
	}
	if cp.Size != uint64(len(hashes)) {
		t.Fatalf("log size %d, the chain has %d entries", cp.Size, len(hashes))
	}
	_, root := LogTreeOf(t, hashes)
	if !bytes.Equal(cp.Root, root) {
		t.Fatalf("log root %x, the tree built from the chain has %x", cp.Root, root)
	}
	vkey, err := b.LogVerifierKey()
	if err != nil || vkey == "" {
		t.Fatalf("LogVerifierKey: %q, %v", vkey, err)
	}
	for _, size := range append(sizes, cp.Size) {
		c, err := b.LogCheckpoint(ctx, size)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", size, err)
		}
		opened, err := tlog.OpenCheckpoint([]byte(c.Note), vkey)
		if err != nil {
			t.Fatalf("checkpoint %d does not open with %s: %v", size, vkey, err)
		}
		if opened.Size != size || !bytes.Equal(opened.Root, c.Root) {
			t.Fatalf("checkpoint %d says size %d root %x; served root %x", size, opened.Size, opened.Root, c.Root)
		}
		_, want := LogTreeOf(t, hashes[:size])
		if !bytes.Equal(c.Root, want) {
			t.Fatalf("checkpoint %d: root %x, want %x", size, c.Root, want)
		}
		for seq := int64(1); seq <= int64(size); seq++ {
			p, err := b.LogInclusion(ctx, seq, size)
			if err != nil {
				t.Fatalf("inclusion of %d in %d: %v", seq, size, err)
			}
			raw, _ := hex.DecodeString(hashes[seq-1])
			if !bytes.Equal(p.LeafHash, tlog.LeafHash(raw)) || p.Index != uint64(seq-1) || p.Size != size {
				t.Fatalf("inclusion of %d in %d: proof %+v names another entry", seq, size, p)
			}
			if err := tlog.VerifyInclusion(p.Index, size, tlog.LeafHash(raw), p.Hashes, c.Root); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", seq, size, err)
			}
		}
		for _, from := range append(sizes, cp.Size) {
			if from > size {
				continue
			}
			p, err := b.LogConsistency(ctx, from, size)
			if err != nil {
				t.Fatalf("consistency %d..%d: %v", from, size, err)
			}
			_, fromRoot := LogTreeOf(t, hashes[:from])
			if err := tlog.VerifyConsistency(from, size, p.Hashes, fromRoot, c.Root); err != nil {
				t.Fatalf("consistency %d..%d: %v", from, size, err)
			}
		}
	}
	return cp
}

// evidenceLogMatchesChain: the log integrates the chain in seq order,
// one leaf per entry; every checkpoint is kept and opens with the
// verifier key; every entry is provably in every size that holds it.
func evidenceLogMatchesChain(f *fixture) {
	var sizes []uint64
	for round := range 3 {
		f.appendMixed(fmt.Sprint("r", round), 3+round*5)
		cp, err := f.b.LogSync(ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		sizes = append(sizes, cp.Size)
	}
	CheckLog(f.t, f.b, chainHashes(f.checkEvents()), sizes)
}

// evidenceLogConcurrent: entries appended by several goroutines at once
// are all integrated, once each, with contiguous indexes.
func evidenceLogConcurrent(f *fixture) {
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				id := fmt.Sprintf("c%d-%d", w, i)
				if _, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: id}); err != nil {
					f.t.Error(err)
					return
				}
				if i%3 == 0 {
					if _, err := f.b.LogSync(ctx); err != nil {
						f.t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	CheckLog(f.t, f.b, chainHashes(f.checkEvents()), nil)
}

// evidenceLogBadInput: proofs of entries or sizes the log does not have
// are clear errors, never a panic.
func evidenceLogBadInput(f *fixture) {
	t := f.t
	if _, err := f.b.LogCheckpoint(ctx, 0); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("checkpoint of an empty log: %v, want not found", err)
	}
	f.appendMixed("b", 2)
	cp, err := f.b.LogSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"seq 0", second(f.b.LogInclusion(ctx, 0, 0)), host.ErrValidation},
		{"seq beyond the log", second(f.b.LogInclusion(ctx, int64(cp.Size)+1, 0)), host.ErrNotFound},
		{"size beyond the log", second(f.b.LogInclusion(ctx, 1, cp.Size+1)), host.ErrNotFound},
		{"seq beyond the size", second(f.b.LogInclusion(ctx, 3, 2)), host.ErrNotFound},
		{"checkpoint beyond the log", second(f.b.LogCheckpoint(ctx, cp.Size+1)), host.ErrNotFound},
		{"from > to", second(f.b.LogConsistency(ctx, 3, 2)), host.ErrValidation},
		{"from 0", second(f.b.LogConsistency(ctx, 0, 2)), host.ErrValidation},
		{"to beyond the log", second(f.b.LogConsistency(ctx, 1, cp.Size+1)), host.ErrNotFound},
		{"from beyond the log", second(f.b.LogConsistency(ctx, cp.Size+1, 0)), host.ErrValidation},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
		if c.err != nil && bytes.ContainsRune([]byte(c.err.Error()), '\n') {
			t.Errorf("%s: error is not one line: %q", c.name, c.err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// nodesLog: entries appended on several nodes of one database are all
// integrated exactly once, with contiguous indexes, whichever node's
// sequencer integrates them.
func nodesLog(f *fixture, nodes []host.Backend) {
	var wg sync.WaitGroup
	for n, b := range nodes {
		wg.Go(func() {
			for i := range 15 {
				if _, err := b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: fmt.Sprintf("n%d-%d", n, i)}); err != nil {
					f.t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	f.b = nodes[0]
	hashes := chainHashes(f.checkEvents())
	for _, b := range nodes {
		CheckLog(f.t, b, hashes, nil)
	}
}
