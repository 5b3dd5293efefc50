package packs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packrun/packrun/internal/textclip"
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
// problems reported below it. Its message is one line: the first
// maxProblems problems, then how many more there are.
type ValidationError struct {
	Problems []Problem
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid pack.json")
	e.write(&b)
	return b.String()
}

// Bounds of a manifest refusal: the problems its message lists, and the
// bytes of one problem's path, message, and of the two together as listed.
// Values a message quotes are cut to maxEcho bytes.
const (
	maxProblems    = 10
	maxProblemPath = 256
	maxProblemText = 256
	maxProblemLine = 300
	maxEcho        = 64
)

// write appends " (N problems)" when there are several, then ": " and the
// first maxProblems problems, separated by "; ".
func (e *ValidationError) write(b *strings.Builder) {
	if len(e.Problems) > 1 {
		fmt.Fprintf(b, " (%d problems)", len(e.Problems))
	}
	b.WriteString(": ")
	for i, p := range e.Problems {
		if i == maxProblems {
			fmt.Fprintf(b, "; and %d more", len(e.Problems)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(oneLine(textclip.Clip(p.String(), maxProblemLine)))
	}
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
		// An entry refused for its name may be long or hold a line break.
		entry := textclip.Clip(e.Entry, maxProblemPath)
		if strings.ContainsFunc(entry, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			entry = strconv.Quote(entry)
		}
		fmt.Fprintf(&b, "%s: ", entry)
	}
	b.WriteString(e.Reason)
	if e.Err != nil {
		var v *ValidationError
		if errors.As(e.Err, &v) {
			// The reason already says the manifest is invalid; list the problems.
			v.write(&b)
		} else if e.Err != ErrTooLarge {
			b.WriteString(": ")
			b.WriteString(oneLine(textclip.Clip(e.Err.Error(), maxProblemLine)))
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

// quote is %q of s cut to maxEcho bytes.
func quote(s string) string { return strconv.Quote(textclip.Clip(s, maxEcho)) }

// oneLine replaces line breaks (a JSON Schema compiler's message may hold
// some) with spaces.
func oneLine(s string) string {
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
