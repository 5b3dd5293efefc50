package adapters

import (
	"errors"
	"fmt"
	"strings"
)

// Refusals: Invoke returns these with a nil *Call, and nothing ran.
var (
	// ErrNotGranted: the adapter id is not in the caller's grant. Checked
	// first, so a pack learns nothing about adapters outside its grant.
	ErrNotGranted = errors.New("adapter not granted")
	// ErrUnknownAdapter: the adapter id is granted but not configured.
	ErrUnknownAdapter = errors.New("unknown adapter")
	// ErrInvalidRequest: the Request is malformed (input not JSON or too
	// large, bad attempt id, no prompt for ollama-generate).
	ErrInvalidRequest = errors.New("invalid adapter request")
)

// Failures: Invoke returns these together with the *Call that records them.
var (
	// ErrFailed: the adapter ran (or tried to) and did not succeed: a
	// non-zero exit, a command that could not start, an HTTP error status,
	// an unusable response, output over the cap, a missing settings file.
	ErrFailed = errors.New("adapter failed")
	// ErrTimeout: timeout_ms (or the caller's deadline) passed; the command's
	// process group was killed or the HTTP request abandoned. Errors that
	// match it also match context.DeadlineExceeded.
	ErrTimeout = errors.New("adapter timed out")
	// ErrSettingsMissing: a file in autonomy.required_settings_files does not
	// exist; the command was not started. Also matches ErrFailed.
	ErrSettingsMissing = errors.New("required settings file missing")
)

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("invalid adapter config")

// InvokeError is every error Invoke returns: the adapter and what went wrong.
type InvokeError struct {
	AdapterID string
	Err       error // wraps one of the sentinels above, or a context error
}

func (e *InvokeError) Error() string { return "adapter " + e.AdapterID + ": " + e.Err.Error() }
func (e *InvokeError) Unwrap() error { return e.Err }

// Problem is one thing wrong with an adapter config.
type Problem struct {
	// Path locates the value in adapters.json, e.g. "$.adapters[1].timeout_ms".
	Path string
	// Message says what is wrong with it.
	Message string
}

func (p Problem) String() string { return p.Path + ": " + p.Message }

// ConfigError lists every problem found in an adapter config: problems of
// shape (syntax, unknown fields, fields the kind does not have, types)
// first, then broken rules, each group in document order. A value with a
// problem has no further problems reported below it.
type ConfigError struct {
	File     string // the file read, or "" for a Config built in Go
	Problems []Problem
}

func (e *ConfigError) Error() string {
	name := "adapter config"
	if e.File != "" {
		name = e.File
	}
	if len(e.Problems) == 1 {
		return "invalid " + name + ": " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid %s (%d problems):", name, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t")
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes every *ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// oneLine flattens process output for use in an error message.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, s)
}
