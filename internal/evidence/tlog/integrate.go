package tlog

import (
	"context"
	"fmt"

	"github.com/transparency-dev/merkle/compact"
)

// Integration is what Integrate produced: the tiles to write (full and
// partial, each at most once) and the tree's new size and root hash.
type Integration struct {
	Tiles []Tile
	Size  uint64
	Root  []byte
}

// Integrate appends leafHashes (each HashSize bytes, see LeafHash) to the
// tree of size oldSize whose tiles r holds, and returns the tiles to
// write and the new size and root. It reads only the partial tile at the
// right edge of each tile level (at most one per TileHeight levels) and
// costs O(len(leafHashes) + log oldSize) hashes (a compact range), never a
// walk of the tree. Nothing is written: the caller stores the tiles (in
// the same transaction as the new size) before it publishes the new root.
func Integrate(ctx context.Context, r TileReader, oldSize uint64, leafHashes [][]byte) (*Integration, error) {
	for i, h := range leafHashes {
		if len(h) != HashSize {
			return nil, checkHash(fmt.Sprintf("leaf hash %d of the batch", i), h)
		}
	}
	newSize := oldSize + uint64(len(leafHashes))
	if newSize < oldSize {
		return nil, fmt.Errorf("integrate %d leaves: the log size overflows", len(leafHashes))
	}

	// The edge tiles: the partial tile of each level of the old tree.
	var edge []TileID
	for l := uint8(0); oldSize>>(TileHeight*uint(l)) > 0; l++ {
		n := oldSize >> (TileHeight * uint(l))
		if w := n % TileWidth; w > 0 {
			edge = append(edge, TileID{Level: l, Index: n / TileWidth, Width: uint16(w)})
		}
	}
	edgeData := make(map[[2]uint64][]byte, len(edge))
	if len(edge) > 0 {
		data, err := r.ReadTiles(ctx, edge)
		if err != nil {
			return nil, fmt.Errorf("integrate at size %d: read tiles: %w", oldSize, err)
		}
		if len(data) != len(edge) {
			return nil, fmt.Errorf("integrate at size %d: read tiles: %d tiles returned for %d asked", oldSize, len(data), len(edge))
		}
		for i, t := range edge {
			if len(data[i]) < int(t.Width)*HashSize {
				return nil, fmt.Errorf("integrate at size %d: tile %s is %d bytes, want %d", oldSize, t.Path(), len(data[i]), int(t.Width)*HashSize)
			}
			edgeData[[2]uint64{uint64(t.Level), t.Index}] = data[i][:int(t.Width)*HashSize]
		}
	}

	// The old tree's compact range: its perfect subtrees, all inside the
	// edge tiles just read.
	ids := compact.RangeNodes(0, oldSize, nil)
	hashes, err := nodeHashes(ctx, edgeReader(edgeData), oldSize, ids)
	if err != nil {
		return nil, fmt.Errorf("integrate at size %d: %w", oldSize, err)
	}
	rng, err := factory.NewRange(0, oldSize, hashes)
	if err != nil {
		return nil, fmt.Errorf("integrate at size %d: %w", oldSize, err)
	}

	// Append, keeping the new hashes of the tile levels.
	fresh := map[uint8][]byte{} // tile level -> new hashes of tree level TileHeight*l, in order
	for l := uint(0); newSize>>(TileHeight*l) > oldSize>>(TileHeight*l); l++ {
		fresh[uint8(l)] = make([]byte, 0, ((newSize>>(TileHeight*l))-(oldSize>>(TileHeight*l)))*HashSize)
	}
	visit := func(id compact.NodeID, h []byte) {
		if id.Level%TileHeight == 0 {
			l := uint8(id.Level / TileHeight)
			fresh[l] = append(fresh[l], h...)
		}
	}
	for _, h := range leafHashes {
		if err := rng.Append(h, visit); err != nil {
			return nil, fmt.Errorf("integrate at size %d: %w", oldSize, err)
		}
	}

	out := &Integration{Size: newSize, Root: EmptyRoot()}
	if newSize > 0 {
		if out.Root, err = rng.GetRootHash(nil); err != nil {
			return nil, fmt.Errorf("integrate at size %d: %w", oldSize, err)
		}
	}
	for l := uint8(0); int(l) < len(fresh); l++ {
		shift := TileHeight * uint(l)
		lo, hi := oldSize>>shift, newSize>>shift // new hashes at this level: [lo, hi)
		add := fresh[l]
		if uint64(len(add)) != (hi-lo)*HashSize {
			return nil, fmt.Errorf("integrate at size %d: level %d has %d new hashes, want %d", oldSize, l, len(add)/HashSize, hi-lo)
		}
		for n := lo / TileWidth; n*TileWidth < hi; n++ {
			start := n * TileWidth
			end := min(start+TileWidth, hi)
			var data []byte
			if start < lo {
				data = append(data, edgeData[[2]uint64{uint64(l), n}]...)
			}
			from := max(start, lo)
			data = append(data, add[(from-lo)*HashSize:(end-lo)*HashSize]...)
			out.Tiles = append(out.Tiles, Tile{TileID: TileID{Level: l, Index: n, Width: uint16(end - start)}, Data: data})
		}
	}
	return out, nil
}

// edgeReader serves the edge tiles Integrate read.
type edgeReader map[[2]uint64][]byte

func (e edgeReader) ReadTiles(_ context.Context, ids []TileID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		d := e[[2]uint64{uint64(id.Level), id.Index}]
		if len(d) < int(id.Width)*HashSize {
			return nil, fmt.Errorf("tile %s: not an edge tile", id.Path())
		}
		out[i] = d
	}
	return out, nil
}

// RootAt is the root hash of the tree of the given size (any size the
// tiles in r cover), from at most one tile per tile level.
func RootAt(ctx context.Context, r TileReader, size uint64) ([]byte, error) {
	if size == 0 {
		return EmptyRoot(), nil
	}
	ids := compact.RangeNodes(0, size, nil)
	hashes, err := nodeHashes(ctx, r, size, ids)
	if err != nil {
		return nil, fmt.Errorf("root of size %d: %w", size, err)
	}
	rng, err := factory.NewRange(0, size, hashes)
	if err != nil {
		return nil, fmt.Errorf("root of size %d: %w", size, err)
	}
	return rng.GetRootHash(nil)
}
