package runtime

import (
	"errors"
	"fmt"
	"strings"
)

// ErrRefused is matched (errors.Is) by every *LoadError: the module was
// refused at load.
var ErrRefused = errors.New("module refused")

// ErrUnknownNode is returned by Invoke when the requested typeId is not one of
// the module's nodes, or when none was given and the module has several.
var ErrUnknownNode = errors.New("unknown node")

// ErrClosed is returned when the Runtime or Module has been closed.
var ErrClosed = errors.New("closed")

// Load error codes (LoadError.Code).
const (
	CodeInvalidModule   = "invalid_module"
	CodeUnsupportedABI  = "unsupported_abi_version"
	CodeUnknownImport   = "unknown_import"
	CodeMissingExport   = "missing_export"
	CodeBadSignature    = "bad_signature"
	CodeInvalidPackName = "invalid_pack_name"
	CodeInvalidNodes    = "invalid_nodes"
	CodeMemoryTooLarge  = "memory_too_large"
	CodeInitFailed      = "init_failed"
	// CodeModuleLimit: the module's shape (size, function count, nesting,
	// tables, ...) or its compilation time exceeds ModuleLimits.
	CodeModuleLimit = "module_limit"
)

// LoadError explains why a module was refused.
type LoadError struct {
	Code   string // one of the Code* constants
	Module string // the name the caller gave the module (usually its path)
	Msg    string
	// Items lists the individual problems (unknown imports as module.name,
	// missing exports, bad signatures) when there are several.
	Items []string
	// Breach is set when the refusal was a limit hit while initialising.
	Breach *Event
	Err    error
}

func (e *LoadError) Error() string {
	var b strings.Builder
	if e.Module != "" {
		b.WriteString(e.Module)
		b.WriteString(": ")
	}
	b.WriteString(e.Code)
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *LoadError) Unwrap() error { return e.Err }

// Is makes every LoadError match ErrRefused.
func (e *LoadError) Is(target error) bool { return target == ErrRefused }

func refuse(code, format string, args ...any) *LoadError {
	return &LoadError{Code: code, Msg: fmt.Sprintf(format, args...)}
}
