package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func (s *Store) blobPath(digest string) string {
	return filepath.Join(s.home, "blobs", "sha256", digest)
}

// putBlob stores b under its sha256, durably: temp file, fsync, rename,
// fsync of the directory. An existing blob is left alone.
func (s *Store) putBlob(b []byte) (string, error) {
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	path := s.blobPath(digest)
	if fi, err := os.Stat(path); err == nil && fi.Size() == int64(len(b)) {
		return digest, nil
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".tmp-"+digest[:12]+"-*")
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(b)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), path)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("store blob %s: %w", digest, werr)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return digest, nil
}

// readBlob reads a blob and checks its digest.
func (s *Store) readBlob(digest string) ([]byte, error) {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("invalid blob digest %q", digest)
	}
	b, err := os.ReadFile(s.blobPath(digest))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", short(digest), err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != digest {
		return nil, fmt.Errorf("blob %s is corrupted (its content no longer matches its digest)", short(digest))
	}
	return b, nil
}

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
