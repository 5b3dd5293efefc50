package registry

import (
	"context"
	"github.com/packrun/packrun/internal/blobs"
	"os"
	"path/filepath"
	"strings"
)

func (s *Store) blobDir() blobs.Dir {
	return blobs.Dir{Path: filepath.Join(s.home, "blobs", "sha256"), TmpPrefix: ".tmp-"}
}

func (s *Store) blobPath(digest string) string { return s.blobDir().File(digest) }

// putBlob stores b under its sha256, durably.
func (s *Store) putBlob(b []byte) (string, error) { return s.blobDir().Put(b) }

// readBlob reads a blob and checks its digest.
func (s *Store) readBlob(digest string) ([]byte, error) { return s.blobDir().Get(digest) }

// sweepTemp removes temporary files left by an interrupted install.
func (s *Store) sweepTemp() {
	paths, _ := filepath.Glob(filepath.Join(s.home, "blobs", "sha256", ".tmp-*"))
	for _, p := range paths {
		os.Remove(p)
	}
}

// sweepBlobs deletes blobs no installed pack refers to. It holds the write
// lock (the transaction) while it works, so no install is between writing
// its blobs and recording them.
func (s *Store) sweepBlobs(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	keep := map[string]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT archive_sha256, COALESCE(bundle_sha256, ''), COALESCE(provenance_sha256, '') FROM packs`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var a, b, c string
		if err := rows.Scan(&a, &b, &c); err != nil {
			rows.Close()
			return err
		}
		keep[a], keep[b], keep[c] = true, true, true
	}
	rows.Close()
	entries, err := os.ReadDir(filepath.Join(s.home, "blobs", "sha256"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !keep[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			os.Remove(s.blobPath(e.Name()))
		}
	}
	return nil
}
