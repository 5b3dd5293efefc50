// Package tlog is the store-independent heart of the evidence log as a
// Merkle tree (issue 33): RFC 6962 hashing, the tree's hashes kept as
// tiles in the C2SP tlog-tiles layout behind a small TileReader a store
// table can implement, Integrate (append a batch of leaves, returning the
// tiles to write), inclusion and consistency proofs built from tiles,
// checkpoints in the C2SP tlog-checkpoint format signed as C2SP signed
// notes by the host key, and the self-contained Bundle an auditor checks
// offline with nothing but the log's verifier key.
//
// The proof arithmetic is github.com/transparency-dev/merkle's, the
// checkpoint text github.com/transparency-dev/formats/log's, the signed
// note golang.org/x/mod/sumdb/note's; this package decides what is stored,
// bounds what it reads, and names what is wrong in one line.
package tlog
