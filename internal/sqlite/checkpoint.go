package sqlite

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// The signed head checkpoint (evidence.Anchor) anchors the chain outside
// the database: after the writer syncs commits that append entries, it
// offers the head to the anchor (writer.onHead), which writes it to
// Options.CheckpointFile beside the database, signed with the host key
// (Options.HostKeyFile, an Ed25519 seed kept apart from the database when
// the operator can). VerifyChain checks the chain against it. The format,
// the key file, the coalescing and the checks are internal/evidence's,
// shared with internal/postgres; what is SQLite's is where the files are
// and seeding an old store's head when it is opened.

// SealDigest seals the digest of an exported file of the given kind (an
// evidence bundle, a trace) with the host key, creating the key if the
// host has none yet.
func (s *Store) SealDigest(kind, digest string) (*host.Seal, error) {
	key, err := s.hostKey.Signing()
	if err != nil {
		return nil, err
	}
	return evidence.SealDigest(key, kind, digest), nil
}

// HostPublicKey is the host key's public half (hex), "" if the host has no
// key yet.
func (s *Store) HostPublicKey() (string, error) {
	key, err := s.hostKey.Load(false)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(key.Public().(ed25519.PublicKey)), nil
}

// checkCheckpoint reads the checkpoint and checks its signature with the
// host key. It returns nil, nil when there is none.
func (s *Store) checkCheckpoint() (*host.ChainHead, *host.ChainBreak) { return s.cp.Check() }

// seedCheckpoint anchors the current head of a store that has events but
// no readable checkpoint (one written before checkpoints existed, or whose
// file a crash cut short).
func (s *Store) seedCheckpoint(ctx context.Context) error {
	if s.cp.Anchored() {
		return nil
	}
	var h eventHead
	err := s.db.QueryRowContext(ctx, headQuery).Scan(&h.seq, &h.hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.cp.Seed(h.seq, h.hash)
}
