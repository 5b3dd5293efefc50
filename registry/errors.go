package registry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/textclip"
)

// ErrUntrusted is matched (errors.Is) by every refusal from Verify and
// VerifyEd25519: a *VerifyError.
var ErrUntrusted = errors.New("pack is not trusted")

// ErrChangedSinceSigned is wrapped by the refusal of an archive whose
// signature bundle names another archive digest: the pack was rebuilt (or
// altered) after it was signed.
var ErrChangedSinceSigned = errors.New("the pack changed since it was signed")

// ErrNotFound is returned by Policy.Remove when no entry has the name. It
// is host.ErrNotFound, the one not-found sentinel (packrun.ErrNotFound is
// the same value).
var ErrNotFound = host.ErrNotFound

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
	CheckIntegrity  = "integrity"  // the archive is not the one its integrity pin (sha256-<base64>) names
	CheckHTTPHosts  = "http-hosts" // the pack's grants.http names a host its namespace is not allowed
)

// VerifyError is a refusal to trust a pack. Its message is one line naming
// the pack (or, for an archive refused before it was opened, its sha256),
// the check that failed and why; values it echoes are clipped, so it stays
// short whatever the input.
type VerifyError struct {
	Pack string // pack name being verified; "" when the archive was refused before it was opened
	// Archive is the lowercase hex sha256 of the archive when Pack is "":
	// its signature was refused before it was opened to learn its name.
	Archive string
	Check   string // one of the Check... constants
	// Code is openwop's error code for the refusal of an openwop pack
	// (pack_signature_invalid, pack_namespace_unauthorized,
	// pack_integrity_failure), "" otherwise.
	Code   string
	Reason string // what was wrong, for a human
	Err    error  // underlying error, if any
}

func (e *VerifyError) Error() string {
	what := textclip.Clip(e.Pack, maxNameLength)
	if what == "" {
		what = "archive sha256:" + short(e.Archive)
	}
	check := e.Check
	if e.Code != "" {
		check += " (" + e.Code + ")"
	}
	msg := fmt.Sprintf("verify %s: %s: %s", what, check, textclip.Clip(e.Reason, maxReason))
	if e.Err != nil {
		msg += ": " + textclip.Clip(e.Err.Error(), maxReason)
	}
	return oneLine(msg)
}

// Is makes every *VerifyError match ErrUntrusted.
func (e *VerifyError) Is(target error) bool { return target == ErrUntrusted }

func (e *VerifyError) Unwrap() error { return e.Err }

func refuse(pack, check string, err error, format string, args ...any) *VerifyError {
	return &VerifyError{Pack: pack, Check: check, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Bounds of what an error message echoes: one value (a name, a pattern, a
// builder id), the items of a list, and a reason or an underlying error as
// a whole (sigstore-go and encoding/json quote their input).
const (
	maxEcho   = 80
	maxItems  = 5
	maxReason = 1024
)

// quote is %q of s cut to maxEcho bytes.
func quote(s string) string { return strconv.Quote(textclip.Clip(s, maxEcho)) }

// list renders at most maxItems quoted values, then how many more there are.
func list(items []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range items {
		if i == maxItems {
			fmt.Fprintf(&b, " and %d more", len(items)-i)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quote(s))
	}
	b.WriteByte(']')
	return b.String()
}

// clipped is an error whose text is cut to maxReason bytes and one line.
type clipped struct{ err error }

func (e clipped) Error() string { return oneLine(textclip.Clip(e.err.Error(), maxReason)) }
func (e clipped) Unwrap() error { return e.err }

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
