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
		art = &host.Artifact{
			ArtifactID: host.NewID("art"), TaskID: in.TaskID, AttemptID: in.AttemptID, Role: in.Role,
			RelativePath: in.Name, ContentType: in.ContentType, SHA256: digest, Size: int64(len(in.Data)),
		}
		// The name is locked (a transaction-level advisory lock on it) so
		// that two nodes storing it at once see each other.
		if _, err := x.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 1))`, in.TaskID+"\n"+in.AttemptID+"\n"+in.Name); err != nil {
			return err
		}
		cur, err := scanArtifact(x.QueryRow(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE task_id = $1 AND attempt_id = $2 AND relative_path = $3`, in.TaskID, in.AttemptID, in.Name))
		if err == nil {
			if cur.SHA256 == digest && cur.Role == in.Role {
				art = cur
				return nil
			}
			return host.Errorf(op, in.Name, host.ErrConflict, "this attempt already stored different content under this name")
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		art.CreatedAt = s.now()
		e, err := x.event(host.EventArtifactRecorded, in.TaskID, in.AttemptID, storecore.ArtifactEventData(art, in))
		if err != nil {
			return err
		}
		// event_seq is known only when the chain entries are linked: the
		// row is inserted then (see flush's after).
		x.after = append(x.after, func(b *pgx.Batch) {
			b.Queue(`INSERT INTO artifacts (artifact_id, task_id, attempt_id, role, relative_path, content_type, sha256, size, created_at, event_seq)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`, art.ArtifactID, art.TaskID, art.AttemptID, string(art.Role), art.RelativePath,
				art.ContentType, art.SHA256, art.Size, ts(art.CreatedAt), e.Seq)
		})
		return nil
	})
	if err != nil {
		return nil, host.Wrap(op, in.Name, err)
	}
	art.CreatedAt = parseTS(ts(art.CreatedAt))
	return art, nil
}

const artifactColumns = `artifact_id, task_id, attempt_id, role, relative_path, content_type, sha256, size, created_at, verified_at`

func scanArtifact(row pgx.Row) (*host.Artifact, error) {
	var a host.Artifact
	var role, created string
	var verified *string
	if err := row.Scan(&a.ArtifactID, &a.TaskID, &a.AttemptID, &role, &a.RelativePath, &a.ContentType, &a.SHA256, &a.Size, &created, &verified); err != nil {
		return nil, err
	}
	a.Role = host.ArtifactRole(role)
	a.CreatedAt = parseTS(created)
	a.VerifiedAt = parseNullTS(verified)
	return &a, nil
}

// Artifact implements host.Evidence.
func (s *Store) Artifact(ctx context.Context, artifactID string) (*host.Artifact, error) {
	a, err := scanArtifact(s.pool.QueryRow(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE artifact_id = $1`, artifactID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get artifact", artifactID, host.ErrNotFound, "")
	}
	return a, host.Wrap("get artifact", artifactID, err)
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
