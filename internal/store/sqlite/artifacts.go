package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/store/storecore"
)

// PutArtifact implements host.Evidence. The bytes are written and synced
// under their digest before the record is committed, so a record never
// names missing bytes (a crash in between leaves at most an unreferenced
// blob).
func (s *Store) PutArtifact(ctx context.Context, in host.ArtifactInput) (*host.Artifact, error) {
	const op = "put artifact"
	if err := storecore.CheckArtifactInput(op, in, s.opts.MaxArtifactBytes); err != nil {
		return nil, err
	}
	digest, err := s.putBlob(in.Data)
	if err != nil {
		return nil, host.Wrap(op, in.Name, err)
	}
	var art *host.Artifact
	err = s.w.do(ctx, func(tx *wtx) error {
		var err error
		art, err = storecore.PutArtifact(ctx, artifactTx{coreTx{s, tx}}, op, in, digest, s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.Name, err)
	}
	return art, nil
}

// artifactTx is the writer's transaction as storecore's artifact rules
// see it.
type artifactTx struct{ coreTx }

func (x artifactTx) RecordArtifact(ctx context.Context, a *host.Artifact, in host.ArtifactInput) error {
	e, err := x.s.event(x.tx, host.EventArtifactRecorded, in.TaskID, in.AttemptID, storecore.ArtifactEventData(a, in))
	if err != nil {
		return err
	}
	_, err = x.Exec(ctx, storecore.InsertArtifactSQL, storecore.ArtifactArgs(a, e.Seq)...)
	return err
}

const artifactColumns = storecore.ArtifactColumns

var scanArtifact = storecore.ScanArtifact

// Artifact implements host.Evidence.
func (s *Store) Artifact(ctx context.Context, artifactID string) (*host.Artifact, error) {
	return storecore.LoadArtifact(ctx, coreDB{s}, artifactID)
}

// ArtifactContent implements host.Evidence.
func (s *Store) ArtifactContent(ctx context.Context, artifactID string) ([]byte, error) {
	a, err := s.Artifact(ctx, artifactID)
	if err != nil {
		return nil, err
	}
	b, err := s.readBlob(a.SHA256)
	return b, host.Wrap("read artifact", artifactID, err)
}

type rowsQueryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// artifactsOf lists an attempt's artifacts (or, with no attempt, a task's).
func (s *Store) artifactsOf(ctx context.Context, q rowsQueryer, taskID, attemptID string) ([]*host.Artifact, error) {
	var rows *sql.Rows
	var err error
	if attemptID != "" {
		rows, err = q.QueryContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE attempt_id = ? ORDER BY event_seq`, attemptID)
	} else {
		rows, err = q.QueryContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE task_id = ? ORDER BY event_seq`, taskID)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*host.Artifact
	for rows.Next() {
		a, err := scanArtifact(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Blobs. Temporary files start with ".host-tmp-": dot-files are skipped
// by the registry's blob sweep, and this prefix keeps its temp-file sweep
// (".tmp-*") away from ours.
const tmpPrefix = ".host-tmp-"

func (s *Store) blobDir() blobs.Dir { return blobs.Dir{Path: s.opts.BlobDir, TmpPrefix: tmpPrefix} }

func (s *Store) blobPath(digest string) string { return s.blobDir().File(digest) }

// putBlob stores b under its sha256, durably.
func (s *Store) putBlob(b []byte) (string, error) { return s.blobDir().Put(b) }

// readBlob reads a blob and checks its digest.
func (s *Store) readBlob(digest string) ([]byte, error) { return s.blobDir().Get(digest) }

// sweepTemp removes our temporary files older than an hour (younger ones
// may belong to another process writing right now).
func (s *Store) sweepTemp() {
	paths, _ := filepath.Glob(filepath.Join(s.opts.BlobDir, tmpPrefix+"*"))
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > time.Hour {
			os.Remove(p)
		}
	}
}
