package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// PutArtifact implements host.Evidence. The bytes go to the blobs table,
// under their digest, in a transaction of their own before the record's:
// a record never names missing bytes, and the batched transaction that
// records it (writer.go) does not carry them.
func (s *Store) PutArtifact(ctx context.Context, in host.ArtifactInput) (*host.Artifact, error) {
	const op = "put artifact"
	if err := storecore.CheckArtifactInput(op, in, s.opts.MaxArtifactBytes); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(in.Data)
	digest := hex.EncodeToString(sum[:])
	if _, err := s.pool.Exec(ctx, `INSERT INTO blobs (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, digest, in.Data); err != nil {
		return nil, host.Wrap(op, in.Name, err)
	}
	var art *host.Artifact
	err := s.write(ctx, func(x *tx) error {
		var err error
		art, err = storecore.PutArtifact(ctx, artifactTx{coreTx{x}}, op, in, digest, s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.Name, err)
	}
	art.CreatedAt = parseTS(ts(art.CreatedAt))
	return art, nil
}

// artifactTx is a write transaction as storecore's artifact rules see it.
type artifactTx struct{ coreTx }

// RecordArtifact appends the event; the row is inserted in flush's
// batch (after), citing the event's pending seq until the linker gives
// it its place (link.go).
func (a artifactTx) RecordArtifact(_ context.Context, art *host.Artifact, in host.ArtifactInput) error {
	e, err := a.x.event(host.EventArtifactRecorded, in.TaskID, in.AttemptID, storecore.ArtifactEventData(art, in))
	if err != nil {
		return err
	}
	a.x.after = append(a.x.after, func(b *pgx.Batch) {
		b.Queue(storecore.InsertArtifactSQL, storecore.ArtifactArgs(art, e.Seq)...)
	})
	return nil
}

// Artifact implements host.Evidence.
func (s *Store) Artifact(ctx context.Context, artifactID string) (*host.Artifact, error) {
	return storecore.LoadArtifact(ctx, corePool{s.pool}, artifactID)
}

// ArtifactContent implements host.Evidence: the bytes, checked against
// their digest.
func (s *Store) ArtifactContent(ctx context.Context, artifactID string) ([]byte, error) {
	const op = "read artifact"
	a, err := s.Artifact(ctx, artifactID)
	if err != nil {
		return nil, err
	}
	var data []byte
	err = s.pool.QueryRow(ctx, `SELECT data FROM blobs WHERE sha256 = $1`, a.SHA256).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, artifactID, host.ErrTampered, "its bytes (sha256 %s) are no longer stored", a.SHA256)
	}
	if err != nil {
		return nil, host.Wrap(op, artifactID, err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != a.SHA256 {
		return nil, host.Errorf(op, artifactID, host.ErrTampered, "its bytes no longer match their digest %s", a.SHA256)
	}
	return data, nil
}
