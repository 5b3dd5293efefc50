package witness

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed: a request body, checkpoint, proof or cosignature that
	// does not parse.
	ErrMalformed = errors.New("malformed")
	// ErrUnknownLog: a checkpoint whose origin the witness is not configured for.
	ErrUnknownLog = errors.New("unknown log origin")
	// ErrBadSignature: a checkpoint without a valid signature by its log's key.
	ErrBadSignature = errors.New("no valid signature by the log's key")
	// ErrInconsistent: a consistency proof that does not verify (a fork).
	ErrInconsistent = errors.New("checkpoint is not consistent with the last one cosigned")
	// ErrNoCosignature: a note that carries no valid cosignature by the witness.
	ErrNoCosignature = errors.New("no valid cosignature by the witness")
)

// ConflictError is the witness's 409: the old size the caller sent is not
// the size of the last checkpoint it cosigned for the origin (Size).
type ConflictError struct {
	Origin string
	Size   uint64
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("witness holds size %d for %q, not the old size sent", e.Size, e.Origin)
}

// RefusedError is any other refusal by a witness, with its HTTP status and
// the first line of its answer.
type RefusedError struct {
	Status int
	Msg    string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("witness refused (%d): %s", e.Status, e.Msg)
}
