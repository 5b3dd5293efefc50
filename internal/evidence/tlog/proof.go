package tlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/transparency-dev/merkle/proof"
)

// MaxProofHashes bounds a proof's length: a proof in a tree of up to
// 2^64 entries has at most 64 hashes (consistency: 65).
const MaxProofHashes = 65

// InclusionProof is the proof that entry index is in the tree of the
// given size, built from the tiles r holds (the hashes of the nodes the
// proof needs, and of the ephemeral node at the right edge rebuilt).
func InclusionProof(ctx context.Context, r TileReader, index, size uint64) ([][]byte, error) {
	if index >= size {
		return nil, fmt.Errorf("inclusion proof: entry %d is not in a log of size %d", index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, fmt.Errorf("inclusion proof of entry %d in size %d: %w", index, size, err)
	}
	return fromTiles(ctx, r, size, nodes)
}

// ConsistencyProof is the proof that the tree of size from is a prefix of
// the tree of size to (from <= to), built from the tiles r holds.
func ConsistencyProof(ctx context.Context, r TileReader, from, to uint64) ([][]byte, error) {
	if from > to {
		return nil, fmt.Errorf("consistency proof: size %d is larger than size %d", from, to)
	}
	nodes, err := proof.Consistency(from, to)
	if err != nil {
		return nil, fmt.Errorf("consistency proof from %d to %d: %w", from, to, err)
	}
	return fromTiles(ctx, r, to, nodes)
}

func fromTiles(ctx context.Context, r TileReader, size uint64, nodes proof.Nodes) ([][]byte, error) {
	hashes, err := nodeHashes(ctx, r, size, nodes.IDs)
	if err != nil {
		return nil, err
	}
	out, err := nodes.Rehash(hashes, NodeHash)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = [][]byte{}
	}
	return out, nil
}

// VerifyInclusion checks that the entry whose leaf hash is leafHash is
// entry index of the tree of the given size and root; the error says in
// one line what is wrong.
func VerifyInclusion(index, size uint64, leafHash []byte, p [][]byte, root []byte) error {
	if err := checkProofShape("inclusion proof", p, root); err != nil {
		return err
	}
	if err := checkHash("leaf hash", leafHash); err != nil {
		return fmt.Errorf("inclusion proof: %w", err)
	}
	if index >= size {
		return fmt.Errorf("inclusion proof: entry %d is not in a log of size %d", index, size)
	}
	got, err := proof.RootFromInclusionProof(hasher, index, size, leafHash, p)
	if err != nil {
		return fmt.Errorf("inclusion proof of entry %d in size %d: %w", index, size, err)
	}
	if !bytes.Equal(got, root) {
		return fmt.Errorf("inclusion proof of entry %d in size %d: it leads to root %s, not the checkpoint's %s: the entry is not in that log (or the proof is forged)",
			index, size, b64(got), b64(root))
	}
	return nil
}

// VerifyConsistency checks that the tree of size from and root fromRoot
// is a prefix of the tree of size to and root toRoot; the error says in
// one line what is wrong.
func VerifyConsistency(from, to uint64, p [][]byte, fromRoot, toRoot []byte) error {
	if err := checkProofShape("consistency proof", p, fromRoot); err != nil {
		return err
	}
	if err := checkHash("root hash", toRoot); err != nil {
		return fmt.Errorf("consistency proof: %w", err)
	}
	if from > to {
		return fmt.Errorf("consistency proof: the log shrank from size %d to %d", from, to)
	}
	err := proof.VerifyConsistency(hasher, from, to, p, fromRoot, toRoot)
	var mismatch proof.RootMismatchError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &mismatch):
		return fmt.Errorf("consistency proof from size %d to %d: it leads to root %s, not %s: the log did not only grow (or the proof is forged)",
			from, to, b64(mismatch.CalculatedRoot), b64(mismatch.ExpectedRoot))
	default:
		return fmt.Errorf("consistency proof from size %d to %d: %w", from, to, err)
	}
}

func checkProofShape(what string, p [][]byte, root []byte) error {
	if len(p) > MaxProofHashes {
		return fmt.Errorf("%s: %d hashes, more than any proof has (%d)", what, len(p), MaxProofHashes)
	}
	for i, h := range p {
		if len(h) != HashSize {
			return fmt.Errorf("%s: %w", what, checkHash(fmt.Sprintf("hash %d", i), h))
		}
	}
	if err := checkHash("root hash", root); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
