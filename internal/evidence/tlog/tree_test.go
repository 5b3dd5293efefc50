package tlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// mth is RFC 6962's Merkle Tree Hash written out from its definition
// (section 2.1), the reference the tiles are checked against.
func mth(leaves [][]byte) []byte {
	switch len(leaves) {
	case 0:
		h := sha256.Sum256(nil)
		return h[:]
	case 1:
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	h := sha256.New()
	h.Write([]byte{1})
	h.Write(mth(leaves[:k]))
	h.Write(mth(leaves[k:]))
	return h.Sum(nil)
}

func entry(i int) []byte { return binary.BigEndian.AppendUint64([]byte("entry "), uint64(i)) }

func leafHashes(from, to int) [][]byte {
	out := make([][]byte, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, LeafHash(entry(i)))
	}
	return out
}

// grow integrates leaves [size, to) in batches of batch and writes the tiles.
func grow(t testing.TB, m *MemoryTiles, size, to, batch int) []byte {
	t.Helper()
	var root []byte
	for size < to {
		n := min(batch, to-size)
		res, err := Integrate(context.Background(), m, uint64(size), leafHashes(size, size+n))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Write(res.Tiles); err != nil {
			t.Fatal(err)
		}
		size, root = int(res.Size), res.Root
	}
	return root
}

func TestHashesAreRFC6962(t *testing.T) {
	want := sha256.Sum256(append([]byte{0}, "x"...))
	if !bytes.Equal(LeafHash([]byte("x")), want[:]) {
		t.Fatal("leaf hash is not SHA-256(0x00||entry)")
	}
	l, r := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	want = sha256.Sum256(append(append([]byte{1}, l...), r...))
	if !bytes.Equal(NodeHash(l, r), want[:]) {
		t.Fatal("node hash is not SHA-256(0x01||l||r)")
	}
}

func TestIntegrateMatchesMerkleTreeHash(t *testing.T) {
	all := leafHashes(0, 1100)
	for _, batch := range []int{1, 3, 100, 255, 256, 257, 1100} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			m := NewMemoryTiles()
			size := 0
			for size < len(all) {
				n := min(batch, len(all)-size)
				res, err := Integrate(context.Background(), m, uint64(size), all[size:size+n])
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Write(res.Tiles); err != nil {
					t.Fatal(err)
				}
				size = int(res.Size)
				if want := mth(all[:size]); !bytes.Equal(res.Root, want) {
					t.Fatalf("root at size %d differs from the Merkle Tree Hash", size)
				}
			}
			for _, s := range []int{0, 1, 2, 255, 256, 257, 513, 1000, 1100} {
				got, err := RootAt(context.Background(), m, uint64(s))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, mth(all[:s])) {
					t.Fatalf("RootAt(%d) differs from the Merkle Tree Hash", s)
				}
			}
		})
	}
}

func TestTilesAreTheTlogTilesLayout(t *testing.T) {
	m := NewMemoryTiles()
	res, err := Integrate(context.Background(), m, 0, leafHashes(0, 3*256+5))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, tl := range res.Tiles {
		paths = append(paths, tl.Path())
	}
	if got, want := strings.Join(paths, " "), "tile/0/000 tile/0/001 tile/0/002 tile/0/003.p/5 tile/1/000.p/3"; got != want {
		t.Fatalf("tiles %q, want %q", got, want)
	}
	all := leafHashes(0, 3*256+5)
	if !bytes.Equal(res.Tiles[3].Data, bytes.Join(all[768:], nil)) {
		t.Fatal("the level-0 partial tile is not the leaf hashes")
	}
	if !bytes.Equal(res.Tiles[4].Data[32:64], mth(all[256:512])) {
		t.Fatal("the level-1 tile does not hold the level-8 hashes")
	}
	if got := (TileID{Level: 0, Index: 1234067, Width: 256}).Path(); got != "tile/0/x001/x234/067" {
		t.Fatalf("path %q", got)
	}
}

// countingTiles counts the tiles read.
type countingTiles struct {
	*MemoryTiles
	read int
}

func (c *countingTiles) ReadTiles(ctx context.Context, ids []TileID) ([][]byte, error) {
	c.read += len(ids)
	return c.MemoryTiles.ReadTiles(ctx, ids)
}

func TestIntegrateReadsOnlyTheEdge(t *testing.T) {
	m := NewMemoryTiles()
	grow(t, m, 0, 70000, 5000) // levels 0, 1 and 2 have partial tiles
	c := &countingTiles{MemoryTiles: m}
	res, err := Integrate(context.Background(), c, 70000, leafHashes(70000, 70001))
	if err != nil {
		t.Fatal(err)
	}
	if c.read > 3 {
		t.Fatalf("integrating one leaf at size 70000 read %d tiles, want at most 3 (one per tile level)", c.read)
	}
	if !bytes.Equal(res.Root, mth(leafHashes(0, 70001))) {
		t.Fatal("wrong root")
	}
}

func TestIntegrateRefusals(t *testing.T) {
	m := NewMemoryTiles()
	grow(t, m, 0, 10, 10)
	for _, tc := range []struct {
		name    string
		size    uint64
		leaves  [][]byte
		wantErr string
	}{
		{"short leaf hash", 10, [][]byte{make([]byte, 31)}, "leaf hash 0 of the batch is 31 bytes"},
		{"tiles missing", 300, leafHashes(0, 1), "tile/0/001.p/44: not stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Integrate(context.Background(), m, tc.size, tc.leaves)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.wantErr)
			}
		})
	}
	// A rewritten tree is refused by the tile store.
	res, err := Integrate(context.Background(), m, 5, leafHashes(100, 101))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Write(res.Tiles); err == nil || !strings.Contains(err.Error(), "contradicts") {
		t.Fatalf("rewriting the tree: err = %v", err)
	}
}

func TestProofsFromTiles(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryTiles()
	const n = 600
	grow(t, m, 0, n, 77)
	all := leafHashes(0, n)
	for _, size := range []uint64{1, 2, 3, 255, 256, 257, 512, 513, 599, 600} {
		root := mth(all[:size])
		for _, idx := range []uint64{0, 1, size / 2, size - 2, size - 1} {
			if idx >= size {
				continue
			}
			p, err := InclusionProof(ctx, m, idx, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(idx, size, all[idx], p, root); err != nil {
				t.Fatalf("entry %d size %d: %v", idx, size, err)
			}
			if size > 1 {
				if err := VerifyInclusion(idx, size, all[(idx+1)%size], p, root); err == nil {
					t.Fatalf("entry %d size %d: another entry's hash verified", idx, size)
				}
			}
		}
		for _, from := range []uint64{0, 1, 7, 256, size / 3, size - 1, size} {
			if from > size {
				continue
			}
			p, err := ConsistencyProof(ctx, m, from, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyConsistency(from, size, p, mth(all[:from]), root); err != nil {
				t.Fatalf("consistency %d..%d: %v", from, size, err)
			}
		}
	}
}

func TestVerifyRefusals(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryTiles()
	all := leafHashes(0, 100)
	root := grow(t, m, 0, 100, 100)
	root50 := mth(all[:50])
	incl, err := InclusionProof(ctx, m, 7, 100)
	if err != nil {
		t.Fatal(err)
	}
	cons, err := ConsistencyProof(ctx, m, 50, 100)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(p [][]byte, i int) [][]byte {
		q := make([][]byte, len(p))
		copy(q, p)
		q[i] = append([]byte(nil), p[i]...)
		q[i][0] ^= 1
		return q
	}
	otherRoot := mth(all[:99])
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"inclusion wrong root", VerifyInclusion(7, 100, all[7], incl, otherRoot), "not the checkpoint's"},
		{"inclusion wrong size", VerifyInclusion(7, 8, all[7], incl, root), "wrong proof size"},
		{"inclusion index beyond size", VerifyInclusion(100, 100, all[7], incl, root), "entry 100 is not in a log of size 100"},
		{"inclusion tampered hash", VerifyInclusion(7, 100, all[7], flip(incl, 2), root), "not the checkpoint's"},
		{"inclusion truncated", VerifyInclusion(7, 100, all[7], incl[:len(incl)-1], root), "wrong proof size"},
		{"inclusion short hash", VerifyInclusion(7, 100, all[7], [][]byte{make([]byte, 3)}, root), "hash 0 is 3 bytes"},
		{"inclusion oversized", VerifyInclusion(7, 100, all[7], make([][]byte, 66), root), "66 hashes"},
		{"consistency wrong old root", VerifyConsistency(50, 100, cons, otherRoot, root), "did not only grow"},
		{"consistency wrong new root", VerifyConsistency(50, 100, cons, root50, otherRoot), "did not only grow"},
		{"consistency shrank", VerifyConsistency(100, 50, cons, root, root50), "shrank from size 100 to 50"},
		{"consistency tampered", VerifyConsistency(50, 100, flip(cons, 1), root50, root), "did not only grow"},
		{"consistency reordered", VerifyConsistency(50, 100, append([][]byte{cons[1], cons[0]}, cons[2:]...), root50, root), "did not only grow"},
		{"consistency truncated", VerifyConsistency(50, 100, cons[:1], root50, root), "wrong proof size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) || strings.Contains(tc.err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", tc.err, tc.want)
			}
		})
	}
	if _, err := InclusionProof(ctx, m, 5, 200); err == nil || !strings.Contains(err.Error(), "not stored") {
		t.Fatalf("proof beyond the tiles: err = %v", err)
	}
}

// shortTiles is a broken store: it returns every tile one hash short.
type shortTiles struct{ *MemoryTiles }

func (s shortTiles) ReadTiles(ctx context.Context, ids []TileID) ([][]byte, error) {
	out, err := s.MemoryTiles.ReadTiles(ctx, ids)
	for i := range out {
		out[i] = out[i][:len(out[i])-HashSize]
	}
	return out, err
}

func TestBrokenTileStoreIsAnError(t *testing.T) {
	m := NewMemoryTiles()
	grow(t, m, 0, 300, 300)
	bad := shortTiles{m}
	if _, err := Integrate(context.Background(), bad, 300, leafHashes(300, 301)); err == nil || !strings.Contains(err.Error(), "tile/0/001.p/44 is 1376 bytes, want 1408") {
		t.Fatalf("Integrate: err = %v", err)
	}
	if _, err := InclusionProof(context.Background(), bad, 3, 300); err == nil || !strings.Contains(err.Error(), "is 8160 bytes, want 8192") {
		t.Fatalf("InclusionProof: err = %v", err)
	}
	// An empty batch changes nothing.
	res, err := Integrate(context.Background(), m, 300, nil)
	if err != nil || res.Size != 300 || len(res.Tiles) != 0 || !bytes.Equal(res.Root, mth(leafHashes(0, 300))) {
		t.Fatalf("empty batch: %+v, %v", res, err)
	}
}

// TestTilesMatchTheChecksumDatabase checks every tile (full and partial,
// as written batch after batch) against golang.org/x/mod/sumdb/tlog, an
// independent implementation of the same layout (its paths carry the
// height, tile/8/L/N, where C2SP's tlog-tiles has tile/L/N).
func TestTilesMatchTheChecksumDatabase(t *testing.T) {
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = stored[x]
		}
		return out, nil
	})
	m := NewMemoryTiles()
	size := 0
	for _, batch := range []int{1, 5, 250, 1, 300, 7000, 2} {
		res, err := Integrate(context.Background(), m, uint64(size), leafHashes(size, size+batch))
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Write(res.Tiles); err != nil {
			t.Fatal(err)
		}
		for i := size; i < size+batch; i++ {
			hs, err := tlog.StoredHashes(int64(i), entry(i), r)
			if err != nil {
				t.Fatal(err)
			}
			stored = append(stored, hs...)
		}
		want := tlog.NewTiles(TileHeight, int64(size), int64(size+batch))
		if len(want) != len(res.Tiles) {
			t.Fatalf("batch at %d: %d tiles, sumdb writes %d", size, len(res.Tiles), len(want))
		}
		for i, w := range want {
			got := res.Tiles[i]
			data, err := tlog.ReadTileData(w, r)
			if err != nil {
				t.Fatal(err)
			}
			if p := strings.Replace(w.Path(), "tile/8/", "tile/", 1); got.Path() != p || !bytes.Equal(got.Data, data) {
				t.Fatalf("batch at %d: tile %s differs from sumdb's %s", size, got.Path(), w.Path())
			}
		}
		size += batch
	}
}
