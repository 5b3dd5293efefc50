package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// The signed head checkpoint, as internal/sqlite writes it (the format,
// the coalescing writes and the checks are internal/evidence's Anchor),
// anchors the chain outside the database: the hash chain cannot show that
// its newest entries were not deleted together. The database is shared,
// the checkpoint is not: each node writes the newest head *its own*
// transactions committed (the seq and hash of the last entry flush
// linked, offered once the commit returned) to Options.CheckpointFile in
// its home, signed with its host key (Options.HostKey). VerifyChain on a
// node checks the chain against that node's checkpoint. Deleting the
// newest entries is caught by every node that committed one of them (by
// every node whose checkpoint names one of them, precisely); a node that
// committed nothing since they were appended cannot see it. When a node
// opens a store that has entries but finds no readable checkpoint (a new
// node, an old home, a file a crash cut short), it anchors the head it
// finds, as SQLite does.

// errCheckpointNoKey: Options.CheckpointFile needs Options.HostKey.
var errCheckpointNoKey = errors.New("a head checkpoint file needs a host key to sign it (Options.HostKey)")

// hostKeyOf is the node's host key as the anchor signs and checks with it.
func hostKeyOf(key ed25519.PrivateKey) evidence.Key {
	pub := hex.EncodeToString(key.Public().(ed25519.PublicKey))
	return evidence.GivenKey(key, "host key "+pub[:16]+"…")
}

// committed anchors head, the chain head a transaction of this node
// appended (nil: none), once the transaction committed.
func (s *Store) committed(head *host.ChainHead) {
	if s.anchor != nil && head != nil {
		s.anchor.Offer(head.Seq, head.Hash)
	}
}

// checkAnchor reads this node's checkpoint and checks its signature; nil,
// nil when there is none (or no checkpoint file is configured).
func (s *Store) checkAnchor() (*host.ChainHead, *host.ChainBreak) {
	if s.anchor == nil {
		return nil, nil
	}
	return s.anchor.Check()
}

// seedCheckpoint anchors the current head of a store that has entries but
// no readable checkpoint in this node's file.
func (s *Store) seedCheckpoint(ctx context.Context) error {
	if s.anchor.Anchored() {
		return nil
	}
	var seq int64
	var hash string
	err := s.pool.QueryRow(ctx, headQuery).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.anchor.Seed(seq, hash)
}
