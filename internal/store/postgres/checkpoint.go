package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The signed head checkpoint, as internal/store/sqlite writes it (the format,
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

// committed anchors head, the chain head this node appended (nil:
// none), and tells the log's sequencer it is durable since durable.
func (s *Store) committed(head *host.ChainHead, durable time.Time) {
	if s.anchor != nil && head != nil {
		s.anchor.Offer(head.Seq, head.Hash)
	}
	if head != nil && s.logSeq != nil {
		s.logSeq.AppendedAt(head.Seq, durable)
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

// anchorState is what evidence.Anchor.Open needs of the database: whether
// this node's host key is recorded as anchoring the chain (one row per
// node key: each node anchors in its own home), and the chain's head.
func (s *Store) anchorState(ctx context.Context) (evidence.OpenState, error) {
	pub := hex.EncodeToString(s.opts.HostKey.Public().(ed25519.PublicKey))
	st := evidence.OpenState{Record: func(pub string) error {
		_, err := s.pool.Exec(context.Background(), `INSERT INTO evidence_anchors (public_key, anchored_at) VALUES ($1, $2)`, pub, ts(s.now()))
		return err
	}}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM evidence_anchors WHERE public_key = $1`, pub).Scan(&n); err != nil {
		return st, err
	}
	if n > 0 {
		st.Recorded = pub
	}
	err := s.pool.QueryRow(ctx, headQuery).Scan(&st.HeadSeq, &st.HeadHash)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return st, err
	}
	return st, nil
}

// anchoring is host.Anchoring's view of the store (storecore.Anchoring).
func (s *Store) anchoring() storecore.Anchoring {
	return storecore.Anchoring{Anchor: s.anchor, State: s.anchorState, Append: s.AppendEvent}
}

// openAnchor checks the evidence anchor as the store opens.
func (s *Store) openAnchor(ctx context.Context) error {
	return s.anchoring().Open(ctx, s.opts.Reanchor)
}
