package witness

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// Log is a log a witness cosigns for: the origin line its checkpoints
// carry and the verifier of its signatures.
type Log struct {
	Origin   string
	VKey     string // "name+hash+base64key" (C2SP signed-note, Ed25519)
	verifier note.Verifier
}

// ParseLog reads "ORIGIN=VKEY", the --log flag's syntax.
func ParseLog(spec string) (Log, error) {
	origin, vkey, ok := strings.Cut(spec, "=")
	if !ok || origin == "" || vkey == "" {
		return Log{}, fmt.Errorf("log %q: want ORIGIN=VKEY", spec)
	}
	return NewLog(origin, vkey)
}

// NewLog checks a log's origin and verifier key.
func NewLog(origin, vkey string) (Log, error) {
	if origin == "" || strings.ContainsAny(origin, "\n") {
		return Log{}, fmt.Errorf("log origin %q: want one non-empty line", origin)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return Log{}, fmt.Errorf("log %s: verifier key %q: %w", origin, vkey, err)
	}
	return Log{Origin: origin, VKey: vkey, verifier: v}, nil
}

// Origin returns the first line of a checkpoint note, its origin, without
// checking anything else.
func Origin(checkpoint []byte) (string, error) {
	line, _, ok := bytes.Cut(checkpoint, []byte("\n"))
	if !ok || len(line) == 0 {
		return "", fmt.Errorf("%w checkpoint: no origin line", ErrMalformed)
	}
	return string(line), nil
}

// OpenCheckpoint verifies a signed checkpoint note (C2SP tlog-checkpoint)
// against its log's key and parses it: the origin must be the log's, the
// size canonical decimal, the root hash HashSize bytes. Errors wrap
// ErrMalformed (the note does not parse) or ErrBadSignature (no valid
// signature by the log's key). It returns the note too, with the log's
// signature among its Sigs.
func OpenCheckpoint(checkpoint []byte, l Log) (log.Checkpoint, *note.Note, error) {
	n, err := note.Open(checkpoint, note.VerifierList(l.verifier))
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return log.Checkpoint{}, nil, fmt.Errorf("checkpoint of %s: %w (key %s)", l.Origin, ErrBadSignature, l.verifier.Name())
	case errors.As(err, &invalid):
		return log.Checkpoint{}, nil, fmt.Errorf("checkpoint of %s: %w: %w", l.Origin, ErrBadSignature, err)
	case err != nil:
		return log.Checkpoint{}, nil, fmt.Errorf("%w checkpoint of %s: %w", ErrMalformed, l.Origin, err)
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return log.Checkpoint{}, nil, fmt.Errorf("%w checkpoint of %s: %w", ErrMalformed, l.Origin, err)
	}
	switch {
	case cp.Origin != l.Origin:
		return log.Checkpoint{}, nil, fmt.Errorf("%w checkpoint: origin %q, want %q", ErrMalformed, clip([]byte(cp.Origin)), l.Origin)
	case len(cp.Hash) != HashSize:
		return log.Checkpoint{}, nil, fmt.Errorf("%w checkpoint of %s: root hash is %d bytes, want %d", ErrMalformed, l.Origin, len(cp.Hash), HashSize)
	case !strings.HasPrefix(n.Text, string(cp.Marshal())):
		return log.Checkpoint{}, nil, fmt.Errorf("%w checkpoint of %s: size or hash not in canonical form", ErrMalformed, l.Origin)
	}
	return cp, n, nil
}
