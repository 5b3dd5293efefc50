package host

import (
	"errors"
	"fmt"
)

// ErrUsage: the request itself is wrong (a limit above the host maximum,
// a negative attempt, a malformed version range), found before anything
// ran. packrun.ErrUsage is this value. An error matching it also matches
// ErrValidation: to the store's and the API's eyes it is the request's
// fault (400).
var ErrUsage = errors.New("invalid request")

// Usage returns an ErrUsage whose message stands on its own (it does not
// repeat "invalid request").
func Usage(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }
func (e *usageError) Is(target error) bool {
	return target == ErrUsage || target == ErrValidation
}
