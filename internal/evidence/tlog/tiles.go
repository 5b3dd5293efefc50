package tlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"
)

// The tree's hashes are stored as tiles, as in C2SP tlog-tiles (and the Go
// checksum database): a tile at level L and index N holds the hashes of
// tree level TileHeight*L, indices N*TileWidth up to N*TileWidth+Width-1,
// concatenated. A full tile holds TileWidth hashes; the tile at the right
// edge of a level is partial (Width < TileWidth) until the tree grows past
// it, and the full tile replaces it. A partial tile is a prefix of every
// wider tile at the same level and index. The hashes of the tree levels
// between two tile levels are not stored: they are recomputed from the
// tile below (at most TileWidth-1 hashes).
const (
	TileHeight = 8
	TileWidth  = 1 << TileHeight
)

// TileID names a tile: its level, its index in the level and its width
// (the number of hashes it holds, 1..TileWidth).
type TileID struct {
	Level uint8
	Index uint64
	Width uint16
}

// Path is the tile's path in the C2SP tlog-tiles layout: tile/L/N[.p/W],
// N in groups of three digits, all but the last prefixed with x.
func (id TileID) Path() string {
	n := strconv.FormatUint(id.Index, 10)
	for len(n)%3 != 0 {
		n = "0" + n
	}
	var parts []string
	for i := 0; i < len(n); i += 3 {
		parts = append(parts, "x"+n[i:i+3])
	}
	last := len(parts) - 1
	parts[last] = strings.TrimPrefix(parts[last], "x")
	p := "tile/" + strconv.Itoa(int(id.Level)) + "/" + strings.Join(parts, "/")
	if id.Width < TileWidth {
		p += ".p/" + strconv.Itoa(int(id.Width))
	}
	return p
}

// Tile is a tile and its hashes (Width*HashSize bytes).
type Tile struct {
	TileID
	Data []byte
}

// TileReader reads tiles: for each id, the tile's hashes, exactly
// id.Width*HashSize bytes or more (a wider tile at the same level and
// index, of which the tile asked is the prefix). A tile it does not hold
// is an error. A store table keyed by (level, index) implements it by
// keeping the widest tile written; MemoryTiles is the in-memory one.
type TileReader interface {
	ReadTiles(ctx context.Context, ids []TileID) ([][]byte, error)
}

// MemoryTiles is an in-memory TileReader for tests and benchmarks: it
// keeps the widest tile written at each level and index.
type MemoryTiles struct {
	mu    sync.RWMutex
	tiles map[[2]uint64][]byte
}

var _ TileReader = (*MemoryTiles)(nil)

// NewMemoryTiles returns an empty in-memory tile store.
func NewMemoryTiles() *MemoryTiles { return &MemoryTiles{tiles: map[[2]uint64][]byte{}} }

// ReadTiles implements TileReader.
func (m *MemoryTiles) ReadTiles(_ context.Context, ids []TileID) ([][]byte, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([][]byte, len(ids))
	for i, id := range ids {
		d := m.tiles[[2]uint64{uint64(id.Level), id.Index}]
		if len(d) < int(id.Width)*HashSize {
			return nil, fmt.Errorf("tile %s: not stored", id.Path())
		}
		out[i] = d[:int(id.Width)*HashSize]
	}
	return out, nil
}

// Write stores tiles returned by Integrate. A tile that is not the prefix
// of the one stored, or of which the stored one is not the prefix (the
// tree was rewritten), is refused and nothing is written.
func (m *MemoryTiles) Write(tiles []Tile) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range tiles {
		if len(t.Data) != int(t.Width)*HashSize {
			return fmt.Errorf("tile %s: %d bytes, want %d", t.Path(), len(t.Data), int(t.Width)*HashSize)
		}
		old := m.tiles[[2]uint64{uint64(t.Level), t.Index}]
		n := min(len(old), len(t.Data))
		if !bytes.Equal(old[:n], t.Data[:n]) {
			return fmt.Errorf("tile %s: contradicts the tile stored (the tree was rewritten)", t.Path())
		}
	}
	for _, t := range tiles {
		k := [2]uint64{uint64(t.Level), t.Index}
		if len(t.Data) > len(m.tiles[k]) {
			m.tiles[k] = append([]byte(nil), t.Data...)
		}
	}
	return nil
}

// tileFor is the tile of a tree of size that holds the bottom hashes of
// the perfect node id, and the offset of the first of them in it.
func tileFor(id compact.NodeID, size uint64) (TileID, int) {
	l := id.Level / TileHeight
	sub := id.Level % TileHeight
	first := id.Index << sub // index at tree level TileHeight*l
	n := first / TileWidth
	width := min(uint64(TileWidth), (size>>(TileHeight*l))-n*TileWidth)
	return TileID{Level: uint8(l), Index: n, Width: uint16(width)}, int(first % TileWidth)
}

// nodeHashes reads the hashes of the perfect nodes ids of a tree of the
// given size from r: one read of the tiles they need.
func nodeHashes(ctx context.Context, r TileReader, size uint64, ids []compact.NodeID) ([][]byte, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	where := make(map[TileID]int)
	var want []TileID
	for _, id := range ids {
		_, end := id.Coverage()
		if end > size {
			return nil, fmt.Errorf("node %d/%d is not in a tree of size %d", id.Level, id.Index, size)
		}
		t, _ := tileFor(id, size)
		if _, ok := where[t]; !ok {
			where[t] = len(want)
			want = append(want, t)
		}
	}
	data, err := r.ReadTiles(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("read tiles: %w", err)
	}
	if len(data) != len(want) {
		return nil, fmt.Errorf("read tiles: %d tiles returned for %d asked", len(data), len(want))
	}
	for i, t := range want {
		if len(data[i]) < int(t.Width)*HashSize {
			return nil, fmt.Errorf("read tiles: tile %s is %d bytes, want %d", t.Path(), len(data[i]), int(t.Width)*HashSize)
		}
	}
	out := make([][]byte, len(ids))
	for i, id := range ids {
		t, off := tileFor(id, size)
		d := data[where[t]]
		n := 1 << (id.Level % TileHeight)
		out[i] = subtreeRoot(d[off*HashSize : (off+n)*HashSize])
	}
	return out, nil
}

// subtreeRoot is the root of the perfect subtree over the concatenated
// hashes (a power of two of them): RFC 6962 interior hashes, level by
// level in one scratch buffer.
func subtreeRoot(hashes []byte) []byte {
	buf := append([]byte(nil), hashes...)
	if len(buf) == HashSize {
		return buf
	}
	h := sha256.New()
	for n := len(buf) / HashSize; n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			h.Reset()
			h.Write([]byte{rfc6962.RFC6962NodeHashPrefix})
			h.Write(buf[2*i*HashSize : (2*i+2)*HashSize])
			h.Sum(buf[i*HashSize : i*HashSize])
		}
	}
	return buf[:HashSize]
}

var factory = &compact.RangeFactory{Hash: NodeHash}
