// Package blobs stores content-addressed files: each blob is named by the
// lowercase hex sha256 of its bytes, written durably (temp file, fsync,
// rename, fsync of the directory) and checked against its name when read.
package blobs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dir is a directory of blobs. TmpPrefix names temporary files (it should
// start with a dot so that sweeps of blob names skip them).
type Dir struct {
	Path      string
	TmpPrefix string
}

// File is where the blob with this digest lives.
func (d Dir) File(digest string) string { return filepath.Join(d.Path, digest) }

// Digest is the name a blob with these bytes gets.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Put stores b and returns its digest. An existing blob of the right size
// is kept as it is.
func (d Dir) Put(b []byte) (string, error) {
	digest := Digest(b)
	p := d.File(digest)
	if fi, err := os.Stat(p); err == nil && fi.Size() == int64(len(b)) {
		return digest, nil
	}
	tmp, err := os.CreateTemp(d.Path, d.TmpPrefix+digest[:12]+"-*")
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
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("store blob %s: %w", digest[:12], werr)
	}
	// The rename is durable once the directory is synced: the store's
	// transaction that names the blob commits after Put returns (RATIONALE.md,
	// "Why blobs first, then one transaction, for install?").
	if err := syncDir(d.Path); err != nil {
		return "", fmt.Errorf("store blob %s: sync %s: %w", digest[:12], d.Path, err)
	}
	return digest, nil
}

// syncDir syncs the directory dir (a variable so a test can fail it).
var syncDir = func(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Get reads a blob and checks its content still matches its digest.
func (d Dir) Get(digest string) ([]byte, error) {
	if len(digest) != 64 || strings.Trim(digest, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("invalid blob digest %q", digest)
	}
	b, err := os.ReadFile(d.File(digest))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", digest[:12], err)
	}
	if Digest(b) != digest {
		return nil, fmt.Errorf("blob %s is corrupted (its content no longer matches its digest)", digest[:12])
	}
	return b, nil
}

// WriteFile writes data to path durably and atomically: through a synced
// temporary file beside it, renamed into place, and the directory synced,
// so a crash leaves the old file or the new one, never a part.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil { // make the rename durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}
