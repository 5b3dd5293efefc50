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
	"github.com/packrun/packrun/internal/store/storecore"
)

// The signed head checkpoint (evidence.Anchor) anchors the chain outside
// the database: after the writer syncs commits that append entries, it
// offers the head to the anchor (writer.onHead), which writes it to
// Options.CheckpointFile beside the database, signed with the host key
// (Options.HostKeyFile, an Ed25519 seed kept apart from the database when
// the operator can). VerifyChain checks the chain against it. The format,
// the key file, the coalescing and the checks are internal/evidence's,
// shared with internal/store/postgres; what is SQLite's is where the files are
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

// anchorState is what evidence.Anchor.Open needs of the database: the key
// the home recorded as anchoring its chain (the newest row of
// evidence_anchors: one home, one anchor at a time), and the chain's head.
func (s *Store) anchorState(ctx context.Context) (evidence.OpenState, error) {
	st := evidence.OpenState{Record: func(pub string) error {
		_, err := s.db.Exec(`INSERT INTO evidence_anchors (public_key, anchored_at) VALUES (?, ?)`, pub, ts(s.now()))
		return err
	}}
	err := s.db.QueryRowContext(ctx, `SELECT public_key FROM evidence_anchors ORDER BY id DESC LIMIT 1`).Scan(&st.Recorded)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	err = s.db.QueryRowContext(ctx, headQuery).Scan(&st.HeadSeq, &st.HeadHash)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, err
	}
	return st, nil
}

// anchoring is host.Anchoring's view of the store (storecore.Anchoring).
func (s *Store) anchoring() storecore.Anchoring {
	return storecore.Anchoring{Anchor: s.cp, State: s.anchorState, Append: s.AppendEvent}
}

// openAnchor checks the evidence anchor as the store opens.
func (s *Store) openAnchor(ctx context.Context) error {
	return s.anchoring().Open(ctx, s.opts.Reanchor)
}
