package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// errNoHostKey: ExportAttempt needs Options.HostKey.
var errNoHostKey = errors.New("no host key to seal the bundle with (Options.HostKey)")

// ExportAttempt implements host.Evidence: the attempt, its artifacts with
// their bytes and its events, sealed with Options.HostKey (this node's
// key: each node seals with its own, and a reader decides which keys it
// trusts).
func (s *Store) ExportAttempt(ctx context.Context, attemptID string) (*host.Bundle, error) {
	const op = "export attempt"
	if len(s.opts.HostKey) != ed25519.PrivateKeySize {
		return nil, host.Wrap(op, attemptID, errNoHostKey)
	}
	a, err := s.Attempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	b := &host.Bundle{Format: host.BundleFormat, ExportedAt: s.now(), Attempt: a, Artifacts: []host.BundleArtifact{}}
	rows, err := s.pool.Query(ctx, `SELECT artifact_id FROM artifacts WHERE attempt_id = $1 ORDER BY event_seq`, attemptID)
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	for _, id := range ids {
		art, err := s.Artifact(ctx, id)
		if err != nil {
			return nil, err
		}
		data, err := s.ArtifactContent(ctx, id)
		if err != nil {
			return nil, err
		}
		b.Artifacts = append(b.Artifacts, host.BundleArtifact{Artifact: *art, Content: data})
	}
	for after := int64(0); ; {
		evs, err := s.Events(ctx, host.EventFilter{AttemptID: attemptID, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		b.Events = append(b.Events, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	digest, err := evidence.BundleDigest(b)
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	b.Seal = evidence.SealDigest(s.opts.HostKey, host.BundleFormat, digest)
	return b, nil
}
