package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// errNoHostKey: ExportAttempt needs Options.HostKey.
var errNoHostKey = errors.New("no host key to seal the bundle with (Options.HostKey)")

// ExportAttempt implements host.Evidence: the attempt, its artifacts with
// their bytes and its events, sealed with Options.HostKey (this node's
// key: each node seals with its own, and a reader decides which keys it
// trusts).
func (s *Store) ExportAttempt(ctx context.Context, attemptID string) (*host.Bundle, error) {
	if len(s.opts.HostKey) != ed25519.PrivateKeySize {
		return nil, host.Wrap("export attempt", attemptID, errNoHostKey)
	}
	return storecore.Exporter{Evidence: s, Now: s.now, Artifacts: s.bundleArtifacts,
		Seal: func(kind, digest string) (*host.Seal, error) {
			return evidence.SealDigest(s.opts.HostKey, kind, digest), nil
		},
	}.ExportAttempt(ctx, attemptID)
}

// bundleArtifacts are an attempt's artifacts with their bytes, in the
// order they were recorded.
func (s *Store) bundleArtifacts(ctx context.Context, a *host.Attempt) ([]host.BundleArtifact, error) {
	rows, err := s.pool.Query(ctx, `SELECT artifact_id FROM artifacts WHERE attempt_id = $1 ORDER BY event_seq`, a.AttemptID)
	if err != nil {
		return nil, host.Wrap("export attempt", a.AttemptID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, host.Wrap("export attempt", a.AttemptID, err)
	}
	out := make([]host.BundleArtifact, 0, len(ids))
	for _, id := range ids {
		art, err := s.Artifact(ctx, id)
		if err != nil {
			return nil, err
		}
		data, err := s.ArtifactContent(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, host.BundleArtifact{Artifact: *art, Content: data})
	}
	return out, nil
}
