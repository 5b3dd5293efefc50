package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/textclip"
)

// Sentinels. Every error a host service returns is an *Error whose Err
// matches (errors.Is) at most one of these; ABIStatus maps them to the status
// a host function returns to the guest.
var (
	// ErrNotFound: no such task, attempt, artifact, route, lock or memory
	// key (an expired memory entry, or one of another tenant, is not found
	// either, and is reported identically). It is the module's one
	// not-found sentinel: packrun.ErrNotFound (a file a request names) and
	// registry.ErrNotFound (a trust-policy entry) are this value.
	ErrNotFound = errors.New("not found")
	// ErrAccessDenied: the caller may not do this. Host services do not
	// check grants themselves; callers (the runtime bridge) return it.
	ErrAccessDenied = errors.New("access denied")
	// ErrValidation: an argument is malformed; Error.Field names it.
	ErrValidation = errors.New("invalid")
	// ErrUnsupported: the request is valid but asks for something packrun
	// does not do (an openwop workflow construct it cannot execute);
	// Error.Field names it.
	ErrUnsupported = errors.New("not supported")
	// ErrTooLarge: a size limit (value, namespace, payload, artifact,
	// follow-ups) would be exceeded.
	ErrTooLarge = errors.New("too large")
	// ErrConflict: the operation does not fit the current state (finishing
	// a task that is not running, a stale attempt, re-recording an attempt
	// with different content, an ambiguous task type).
	ErrConflict = errors.New("conflict")
	// ErrIdempotencyMismatch: an Idempotency-Key reused with another
	// request (it wraps ErrConflict).
	ErrIdempotencyMismatch = fmt.Errorf("idempotency key reused with another request: %w", ErrConflict)
	// ErrOutOfRange: a well-formed argument points past what exists (a
	// fork's fromSeq past the end of its run's log); it wraps
	// ErrValidation, and the openwop API answers it 422.
	ErrOutOfRange = fmt.Errorf("out of range: %w", ErrValidation)
	// ErrEmpty: Claim found no task available now.
	ErrEmpty = errors.New("no task is available")
	// ErrLocked: the dispatch lock is held by another holder.
	ErrLocked = errors.New("dispatch lock is held")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store is closed")
	// ErrUnavailable: the backend cannot take the request now — its disk
	// is full — and nothing of it was stored; the same call may succeed
	// once there is room (Retryable).
	ErrUnavailable = errors.New("unavailable")
	// ErrTampered: stored evidence no longer matches what was recorded
	// (a *ChainBreak says where); nothing is served from it.
	ErrTampered = errors.New("evidence tampered")
	// ErrUnanchored: the home's evidence anchor — its signed head
	// checkpoint or the host key that signs it — is missing, damaged or
	// replaced, so the chain cannot be checked against what the home
	// anchored. Nothing re-creates it silently: the operator re-anchors
	// (packrun evidence reanchor), which the chain records.
	ErrUnanchored = errors.New("evidence anchor lost")
)

// Error is the error every host service returns. Its message is one line:
// "<op> <subject>: <field>: <reason>". Subject and the reason only ever name
// the caller's own data (its key, its task), never another tenant's.
type Error struct {
	Op      string // what was attempted: "memory get", "enqueue", "finish", ...
	Subject string // what it was attempted on: a task id, "namespace/key", ...
	Field   string // for validation errors, the field at fault ("payload", "schedule.delay_minutes")
	Err     error  // matches one sentinel above; may wrap a cause
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if e.Subject != "" {
		b.WriteString(" ")
		b.WriteString(e.Subject)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// reason is an explanation that matches a sentinel without repeating it.
type reason struct {
	msg  string
	kind error
}

func (r *reason) Error() string { return r.msg }
func (r *reason) Unwrap() error { return r.kind }

// Errorf returns an *Error whose Err matches kind (a sentinel) and reads as
// the formatted explanation; with an empty format it reads as kind itself.
func Errorf(op, subject string, kind error, format string, args ...any) *Error {
	if format == "" {
		return &Error{Op: op, Subject: subject, Err: kind}
	}
	return &Error{Op: op, Subject: subject, Err: &reason{fmt.Sprintf(format, args...), kind}}
}

// Invalid returns a validation *Error naming field.
func Invalid(op, field, format string, args ...any) *Error {
	return &Error{Op: op, Field: field, Err: &reason{fmt.Sprintf(format, args...), ErrValidation}}
}

// Wrap returns an *Error for an unexpected failure (a host error, status 99).
func Wrap(op, subject string, err error) error {
	if err == nil {
		return nil
	}
	var he *Error
	if errors.As(err, &he) {
		return err
	}
	return &Error{Op: op, Subject: subject, Err: err}
}

// ABIStatus maps an error from a host service to the status a
// packrun:host/v1 function returns: nil → ok, ErrAccessDenied → 1,
// ErrValidation and ErrConflict → 10, ErrNotFound → 11, ErrTooLarge → 20
// (a limit, like the other capability breaches), anything else → 99.
func ABIStatus(err error) abi.Status {
	switch {
	case err == nil:
		return abi.StatusOK
	case errors.Is(err, ErrAccessDenied):
		return abi.StatusAccessDenied
	case errors.Is(err, ErrValidation), errors.Is(err, ErrConflict):
		return abi.StatusValidation
	case errors.Is(err, ErrNotFound):
		return abi.StatusNotFound
	case errors.Is(err, ErrTooLarge):
		return abi.StatusCapabilityBreach
	}
	return abi.StatusHostError
}

// Retryable reports whether err is a failure of the backend itself (an I/O
// error, a full disk: ErrUnavailable) rather than an answer about the
// request: the same call may succeed later. An error matching a sentinel is an answer
// (asking again gets the same one); ErrClosed and context errors are final.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	for _, answer := range []error{ErrNotFound, ErrAccessDenied, ErrValidation, ErrTooLarge, ErrConflict, ErrEmpty, ErrLocked, ErrClosed, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, answer) {
			return false
		}
	}
	return true
}

// ShortName is an untrusted name (an unknown field's) cut to at most 64
// bytes on a character boundary, with "…" when cut, so that an error
// naming it stays short.
func ShortName(s string) string { return textclip.Clip(s, 64) }

// UnknownField reports whether err is encoding/json refusing a field (a
// Decoder with DisallowUnknownFields) and names the field, cut by
// ShortName.
func UnknownField(err error) (string, bool) {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	return ShortName(strings.Trim(name, `"`)), true
}
