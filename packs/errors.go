package packs

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPack is matched (errors.Is) by every *FormatError and every
// *ValidationError: the pack, its archive or its manifest is not acceptable.
// The CLI maps it to exit status 5.
var ErrInvalidPack = errors.New("invalid pack")

// ErrInvalidManifest is matched by every *ValidationError, also when a
// *FormatError wraps one.
var ErrInvalidManifest = errors.New("invalid manifest")

// ErrTooLarge is wrapped by a *FormatError when a size or count limit (see
// Limits) was exceeded.
var ErrTooLarge = errors.New("limit exceeded")

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Path locates the value in pack.json, e.g. "$.nodes[2].typeId".
	Path string
	// Message says what is wrong with it.
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// ValidationError lists every problem found in a manifest: problems of shape
// (syntax, unknown fields, types, missing fields) first, then broken rules,
// each group in document order. A value with a problem has no further
// problems reported below it.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid pack.json: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid pack.json (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes every ValidationError match ErrInvalidManifest and ErrInvalidPack.
func (e *ValidationError) Is(target error) bool {
	return target == ErrInvalidManifest || target == ErrInvalidPack
}

// FormatError explains why a pack directory or archive was refused.
type FormatError struct {
	// Entry is the file at fault, as a slash-separated path relative to the
	// pack root ("pack.json", "hello.wasm", "assets/x"), or "" when the fault
	// is in the archive as a whole (gzip or tar framing, total size).
	Entry string
	// Reason says what is wrong, in words meant for the user.
	Reason string
	// Err is the underlying cause, if any: a *ValidationError for the
	// manifest, ErrTooLarge for a limit, a gzip or tar error.
	Err error
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("invalid pack: ")
	if e.Entry != "" {
		fmt.Fprintf(&b, "%s: ", e.Entry)
	}
	b.WriteString(e.Reason)
	if e.Err != nil {
		var v *ValidationError
		if errors.As(e.Err, &v) {
			// The reason already says the manifest is invalid; list the problems.
			for _, p := range v.Problems {
				b.WriteString("\n\t")
				b.WriteString(p.String())
			}
		} else if e.Err != ErrTooLarge {
			b.WriteString(": ")
			b.WriteString(e.Err.Error())
		}
	}
	return b.String()
}

func (e *FormatError) Unwrap() error { return e.Err }

// Is makes every FormatError match ErrInvalidPack.
func (e *FormatError) Is(target error) bool { return target == ErrInvalidPack }

func formatErr(entry string, err error, format string, args ...any) *FormatError {
	return &FormatError{Entry: entry, Reason: fmt.Sprintf(format, args...), Err: err}
}
