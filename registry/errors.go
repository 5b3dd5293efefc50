package registry

import (
	"errors"
	"fmt"
)

// ErrUntrusted is matched (errors.Is) by every refusal from Verify and
// VerifyEd25519: a *VerifyError.
var ErrUntrusted = errors.New("pack is not trusted")

// ErrNotFound is returned by Policy.Remove when no entry has the name.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a policy entry with the same name exists, or
// when GenerateKey would overwrite a file.
var ErrExists = errors.New("already exists")

// The checks a *VerifyError names.
const (
	CheckBundle     = "bundle"     // the bundle is too large, not a Sigstore bundle, or the wrong kind
	CheckUnsigned   = "unsigned"   // no signature bundle was given
	CheckSignature  = "signature"  // no trusted key or identity produced a valid signature
	CheckNamespace  = "namespace"  // the signer is trusted, but not for this pack's name
	CheckProvenance = "provenance" // provenance missing, invalid, or not about this archive
	CheckBuilder    = "builder"    // provenance names a builder the policy does not allow
	CheckPolicy     = "policy"     // the trust policy itself is unusable (e.g. keyless without a trusted root)
)

// VerifyError is a refusal to trust a pack. Its message is one line naming
// the pack, the check that failed and why.
type VerifyError struct {
	Pack   string // pack name being verified
	Check  string // one of the Check... constants
	Reason string // what was wrong, for a human
	Err    error  // underlying error, if any
}

func (e *VerifyError) Error() string {
	msg := fmt.Sprintf("verify %s: %s: %s", e.Pack, e.Check, e.Reason)
	if e.Err != nil {
		msg += ": " + oneLine(e.Err.Error())
	}
	return msg
}

// Is makes every *VerifyError match ErrUntrusted.
func (e *VerifyError) Is(target error) bool { return target == ErrUntrusted }

func (e *VerifyError) Unwrap() error { return e.Err }

func refuse(pack, check string, err error, format string, args ...any) *VerifyError {
	return &VerifyError{Pack: pack, Check: check, Reason: fmt.Sprintf(format, args...), Err: err}
}

// oneLine keeps error messages on one line: sigstore-go and protojson
// sometimes embed newlines.
func oneLine(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == '\n' || c == '\r' {
			b[i] = ' '
		}
	}
	return string(b)
}
