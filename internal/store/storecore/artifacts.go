package storecore

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The artifact rules of host.Evidence, written once against Tx. Where the
// bytes live is the driver's; so is the insert of the record, which names
// the sequence number of its event (ArtifactTx).

// ArtifactTx is a write transaction that can record an artifact.
type ArtifactTx interface {
	LockTx
	// RecordArtifact appends the artifact's event (ArtifactEventData) and
	// inserts its row (InsertArtifactSQL, ArtifactArgs) with the event's
	// sequence number.
	RecordArtifact(ctx context.Context, a *host.Artifact, in host.ArtifactInput) error
}

// ArtifactColumns are the columns of an artifacts row, as ScanArtifact
// reads them.
const ArtifactColumns = `artifact_id, task_id, attempt_id, role, relative_path, content_type, sha256, size, created_at, verified_at`

// InsertArtifactSQL inserts an artifacts row (ArtifactArgs).
const InsertArtifactSQL = `INSERT INTO artifacts (artifact_id, task_id, attempt_id, role, relative_path, content_type, sha256, size, created_at, event_seq)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

// ArtifactArgs are InsertArtifactSQL's arguments for a, recorded by the
// event seq.
func ArtifactArgs(a *host.Artifact, seq int64) []any {
	return []any{a.ArtifactID, a.TaskID, a.AttemptID, string(a.Role), a.RelativePath, a.ContentType,
		a.SHA256, a.Size, host.FormatTime(a.CreatedAt), seq}
}

// ScanArtifact reads an artifacts row (ArtifactColumns).
func ScanArtifact(row Row) (*host.Artifact, error) {
	var a host.Artifact
	var role, created string
	var verified *string
	if err := row.Scan(&a.ArtifactID, &a.TaskID, &a.AttemptID, &role, &a.RelativePath, &a.ContentType, &a.SHA256, &a.Size, &created, &verified); err != nil {
		return nil, err
	}
	a.Role = host.ArtifactRole(role)
	a.CreatedAt = ParseTime(created)
	a.VerifiedAt = parseNullTime(verified)
	return &a, nil
}

// LoadArtifact reads the artifact id (none is ErrNotFound).
func LoadArtifact(ctx context.Context, q Querier, id string) (*host.Artifact, error) {
	a, err := ScanArtifact(q.QueryRow(ctx, `SELECT `+ArtifactColumns+` FROM artifacts WHERE artifact_id = $1`, id))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("get artifact", id, host.ErrNotFound, "")
	}
	return a, host.Wrap("get artifact", id, err)
}

// PutArtifact records the artifact in (checked by CheckArtifactInput),
// its bytes stored already under digest (errors under op). The same
// content under the same name of the same attempt is the artifact stored
// before; other content is a conflict.
func PutArtifact(ctx context.Context, tx ArtifactTx, op string, in host.ArtifactInput, digest string, now time.Time) (*host.Artifact, error) {
	// The name is locked so that two nodes storing it at once see each
	// other.
	if err := tx.LockName(ctx, LockArtifactName, in.TaskID+"\n"+in.AttemptID+"\n"+in.Name); err != nil {
		return nil, err
	}
	cur, err := ScanArtifact(tx.QueryRow(ctx, `SELECT `+ArtifactColumns+` FROM artifacts WHERE task_id = $1 AND attempt_id = $2 AND relative_path = $3`, in.TaskID, in.AttemptID, in.Name))
	if err == nil {
		if cur.SHA256 == digest && cur.Role == in.Role {
			return cur, nil
		}
		return nil, host.Errorf(op, in.Name, host.ErrConflict, "this attempt already stored different content under this name")
	}
	if !errors.Is(err, ErrNoRows) {
		return nil, err
	}
	art := &host.Artifact{
		ArtifactID: host.NewID("art"), TaskID: in.TaskID, AttemptID: in.AttemptID, Role: in.Role,
		RelativePath: in.Name, ContentType: in.ContentType, SHA256: digest, Size: int64(len(in.Data)),
		CreatedAt: now,
	}
	if err := tx.RecordArtifact(ctx, art, in); err != nil {
		return nil, err
	}
	return art, nil
}
