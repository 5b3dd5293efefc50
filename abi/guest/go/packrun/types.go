package packrun

import "strconv"

// This file holds the parts of the SDK that do not touch the ABI, so they
// build on any platform (the rest of the package is wasip1-only).

// Status is the status code a host function returns. Zero is success; a
// module treats any unknown non-zero status as failure. The values are those
// of the packrun host ABI v1.
type Status int32

// Host status codes.
const (
	StatusOK               Status = 0
	StatusAccessDenied     Status = 1  // the pack's manifest does not grant the service
	StatusValidation       Status = 10 // the request was malformed or refused
	StatusNotFound         Status = 11 // no such entry (memory_get, config_get, unset variable)
	StatusCapabilityBreach Status = 20 // a limit was exceeded
	StatusHostError        Status = 99 // the host failed
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusAccessDenied:
		return "access_denied"
	case StatusValidation:
		return "validation_error"
	case StatusNotFound:
		return "not_found"
	case StatusCapabilityBreach:
		return "capability_breach"
	case StatusHostError:
		return "host_error"
	}
	return "status " + strconv.Itoa(int(s))
}

// StatusError is the error of a host call that returned a non-zero status.
// Compare with errors.Is against ErrNotFound, ErrAccessDenied, ...
type StatusError struct {
	// Func names the host function, e.g. "packrun:host/v1.memory_get".
	Func   string
	Status Status
	// Message and Kind are the host's {"error","kind"} when it explains a
	// refusal (http_request does; Kind names the limit of a
	// StatusCapabilityBreach, e.g. "http-timeout").
	Message, Kind string
}

func (e *StatusError) Error() string {
	s := e.Func + ": " + e.Status.String()
	if e.Func == "" {
		s = "packrun: " + e.Status.String()
	}
	if e.Kind != "" {
		s += " (" + e.Kind + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is matches a *StatusError with the same status whose Func is empty or
// equal, so errors.Is(err, packrun.ErrNotFound) works for every function.
func (e *StatusError) Is(target error) bool {
	t, ok := target.(*StatusError)
	return ok && t.Status == e.Status && (t.Func == "" || t.Func == e.Func)
}

// Sentinels for errors.Is.
var (
	ErrAccessDenied     = &StatusError{Status: StatusAccessDenied}
	ErrValidation       = &StatusError{Status: StatusValidation}
	ErrNotFound         = &StatusError{Status: StatusNotFound}
	ErrCapabilityBreach = &StatusError{Status: StatusCapabilityBreach}
	ErrHostError        = &StatusError{Status: StatusHostError}
)

// Level is the level of a log message.
type Level int32

// Log levels.
const (
	LevelTrace Level = 0
	LevelDebug Level = 1
	LevelInfo  Level = 2
	LevelWarn  Level = 3
	LevelError Level = 4
)

// Failure is a node failure with a stable code: returned from a handler (also
// wrapped), it ends the invocation with outcome "failed" and this error
// object. Any other error fails with code "node_error".
type Failure struct {
	Code    string
	Message string
	// Details, when not nil, is encoded as JSON into error.details.
	Details any
}

// Fail returns a *Failure with code and message.
func Fail(code, message string) *Failure { return &Failure{Code: code, Message: message} }

// WithDetails sets the failure's details and returns it.
func (f *Failure) WithDetails(details any) *Failure {
	f.Details = details
	return f
}

func (f *Failure) Error() string {
	if f.Message == "" {
		return f.Code
	}
	return f.Code + ": " + f.Message
}

// Suspension, returned from a handler (also wrapped), ends the invocation
// with outcome "suspended" and Payload (encoded as JSON) as the interrupt.
// The host re-invokes the node when the run is resumed.
type Suspension struct {
	Payload any
}

// Suspend returns a *Suspension error carrying payload.
func Suspend(payload any) error { return &Suspension{Payload: payload} }

func (s *Suspension) Error() string { return "packrun: suspended" }
