package witness

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/transparency-dev/formats/log"
)

// stateDir keeps, per origin, the last checkpoint the witness cosigned
// (its origin, size and root hash lines) in a file named by the SHA-256
// of the origin.
type stateDir string

func (d stateDir) path(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return filepath.Join(string(d), hex.EncodeToString(sum[:])+".checkpoint")
}

// load returns the last cosigned checkpoint of origin (size 0, no hash:
// none yet).
func (d stateDir) load(origin string) (log.Checkpoint, error) {
	p := d.path(origin)
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return log.Checkpoint{Origin: origin}, nil
	}
	if err != nil {
		return log.Checkpoint{}, fmt.Errorf("witness state of %s: %w", origin, err)
	}
	var cp log.Checkpoint
	rest, err := cp.Unmarshal(b)
	switch {
	case err != nil:
		return log.Checkpoint{}, fmt.Errorf("witness state %s: %w", p, err)
	case len(rest) != 0 || cp.Origin != origin || len(cp.Hash) != HashSize:
		return log.Checkpoint{}, fmt.Errorf("witness state %s: not the checkpoint of %s", p, origin)
	}
	return cp, nil
}

// store makes cp the last cosigned checkpoint of its origin, durably:
// when it returns, a crash (kill -9, power loss) keeps it.
func (d stateDir) store(cp log.Checkpoint) error {
	if err := writeFileDurably(d.path(cp.Origin), cp.Marshal(), 0o600); err != nil {
		return fmt.Errorf("witness state of %s: %w", cp.Origin, err)
	}
	return nil
}

// writeFileDurably replaces path with data: a temporary file in the same
// directory is written and fsynced, renamed over path, and the directory
// fsynced, so path holds either the old or the new bytes after any crash.
func writeFileDurably(path string, data []byte, perm fs.FileMode) error {
	return putFileDurably(path, data, perm, os.Rename)
}

// createFileDurably is writeFileDurably that never replaces an existing
// path (fs.ErrExist): two processes creating it at once keep one.
func createFileDurably(path string, data []byte, perm fs.FileMode) error {
	return putFileDurably(path, data, perm, os.Link)
}

func putFileDurably(path string, data []byte, perm fs.FileMode, put func(tmp, path string) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a rename: nothing to remove; after a link: the extra name
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := put(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
