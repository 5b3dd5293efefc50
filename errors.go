package packrun

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Errors a Host returns, matched with errors.Is. Besides these, errors
// wrap the sentinels of the packages below: host.ErrPackNotInstalled,
// host.ErrNotFound (a task, attempt or memory key), runtime.ErrUnknownNode,
// runtime.ErrRefused (a module refused at load), registry.ErrUntrusted,
// packs.ErrInvalidPack, host.ErrPackConflict.
var (
	// ErrNoHome: Config.MustExist was set and the home does not exist.
	ErrNoHome = errors.New("packrun home does not exist")
	// ErrConfig: a configuration file in the home (config.json,
	// adapters.json) is malformed.
	ErrConfig = errors.New("bad configuration")
	// ErrUsage: the request itself is wrong (a limit above the host
	// maximum, a negative attempt, a malformed version range), found
	// before anything ran.
	ErrUsage = errors.New("invalid request")
	// ErrNotFound: a file the request names does not exist.
	ErrNotFound = errors.New("not found")
)

// readFileLimited reads at most limit bytes of path; a larger file is an
// error naming the limit.
func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w", path, &TooLargeError{Limit: limit})
	}
	return b, nil
}

// TooLargeError is a file over the size a Host reads.
type TooLargeError struct{ Limit int64 }

func (e *TooLargeError) Error() string { return fmt.Sprintf("larger than %d bytes", e.Limit) }
