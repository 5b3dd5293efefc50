package packrun

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
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
	// before anything ran. It is host.ErrUsage, so the packages below
	// the Host (the pack index) refuse with it too.
	ErrUsage = host.ErrUsage
	// ErrNotFound: a file the request names does not exist (or a task,
	// attempt, pack file, sensor... the request names). It is
	// host.ErrNotFound, the one not-found sentinel (registry.ErrNotFound
	// is the same value), so errors.Is matches any of the three names.
	ErrNotFound = host.ErrNotFound
	// ErrInputRefused: the node's inputSchema refused the input of an
	// invocation; nothing ran, and the refused attempt is recorded (an
	// *dispatch.InputError names the path at fault and the attempt).
	ErrInputRefused = dispatch.ErrInputRefused
)

// ReadFile reads the file at path, at most limit bytes of it: a larger
// file is a *TooLargeError, a missing one an error matching both
// ErrNotFound and fs.ErrNotExist ("PATH: no such file").
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &kindError{kind: ErrNotFound, msg: path + ": no such file", cause: err}
	}
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

// kindError is an error of one of the kinds above whose message stands on
// its own (errors.Is matches the kind; the message does not repeat it).
type kindError struct {
	kind  error
	msg   string
	cause error // may be nil
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.cause }
func (e *kindError) Is(target error) bool {
	// A usage error is the request's fault: to the store's and the API's
	// eyes, a validation error (400).
	return target == e.kind || e.kind == ErrUsage && target == host.ErrValidation
}

func usageErr(format string, args ...any) error {
	return &kindError{kind: ErrUsage, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &kindError{kind: ErrNotFound, msg: fmt.Sprintf(format, args...)}
}
