package registry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"

	"github.com/packrun/packrun/packs"
)

// openwop's error codes (spec/v1/node-packs.md, spec/v2/core/packs.md) a
// refusal of an openwop pack carries in VerifyError.Code.
const (
	CodeSignatureInvalid      = "pack_signature_invalid"
	CodeNamespaceUnauthorized = "pack_namespace_unauthorized"
	CodeIntegrityFailure      = "pack_integrity_failure"
)

// openwopCode is the openwop code of a check, "" when it has none.
func openwopCode(check string) string {
	switch check {
	case CheckSignature, CheckUnsigned, CheckBundle:
		return CodeSignatureInvalid
	case CheckNamespace:
		return CodeNamespaceUnauthorized
	case CheckIntegrity:
		return CodeIntegrityFailure
	}
	return ""
}

// withOpenwopCode sets the openwop code of err when it is a *VerifyError.
func withOpenwopCode(err error) error {
	if ve, ok := err.(*VerifyError); ok && ve.Code == "" {
		ve.Code = openwopCode(ve.Check)
	}
	return err
}

// ParseIntegrity decodes an openwop integrity pin, "sha256-" and the
// standard base64 of a SHA-256 digest (what a registry's version manifest
// and a pack-lock.json carry).
func ParseIntegrity(pin string) ([]byte, error) {
	b64, ok := strings.CutPrefix(pin, "sha256-")
	if !ok {
		return nil, refuse("", CheckIntegrity, nil, "integrity %s is not sha256-<base64>", quote(pin))
	}
	sum, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(sum) != sha256.Size {
		return nil, refuse("", CheckIntegrity, nil, "integrity %s is not sha256-<base64 of 32 bytes>", quote(pin))
	}
	return sum, nil
}

// Integrity is the openwop integrity pin of b: "sha256-<base64>".
func Integrity(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// checkIntegrity refuses an archive whose digest is not the pin.
func checkIntegrity(pin string, digest []byte, name string) *VerifyError {
	want, err := ParseIntegrity(pin)
	if err != nil {
		ve := err.(*VerifyError)
		ve.Pack = name
		return ve
	}
	if !bytes.Equal(want, digest) {
		return refuse(name, CheckIntegrity, nil, "the archive is %s, not the pinned %s", "sha256-"+base64.StdEncoding.EncodeToString(digest), quote(pin))
	}
	return nil
}

// vouchOpenwop finishes verifying an opened openwop pack (arch.Manifest
// has Openwop set) by the scheme its pack.json and signatures use:
//
//   - v2 (signing.scheme ed25519-canonical-json): the detached signature
//     must verify over the RFC 8785 canonical form of pack.json with the
//     trusted registry key named signing.keyId; a signature over the
//     tarball is not a v2 signature.
//   - a detached signature over the tarball (the v1 registry tree): it
//     verified before the archive was opened.
//   - v1 pack.json.sig (or signing.signatureRef) in the archive: an
//     Ed25519 signature over pack.json as stored, by a trusted registry key.
//
// A signature over pack.json alone does not cover the module, so those two
// schemes are accepted only when the archive's digest was pinned (Signed.
// Integrity; checkSigned). An archive signed with a Sigstore bundle is
// judged as any packrun pack (provenance included). The signer must be
// trusted for the pack's name.
func (s *signedArchive) vouchOpenwop(arch *packs.Archive, sig []byte) (*Verdict, error) {
	m := arch.Manifest
	name, ow := m.Name, m.Openwop
	pj, _ := arch.File(packs.ManifestName)
	v2 := ow.Signing != nil && ow.Signing.Scheme == packs.SchemeCanonicalJSON
	ref := packs.ManifestName + ".sig"
	if ow.Signing != nil && ow.Signing.SignatureRef != "" {
		ref = strings.TrimPrefix(ow.Signing.SignatureRef, "./")
	}
	msig, hasManifestSig := arch.File(ref)
	var (
		signers []signer
		verr    *VerifyError
	)
	switch {
	case len(s.signers) > 0 && !s.openwop:
		// A Sigstore bundle over the archive: packrun's own trust, judged
		// like any packrun pack's (provenance included) by vouch.
		return s.vouch(name)
	case s.unsigned && !s.pinned: // AllowUnsignedUnsafe: nothing to judge
	case v2 && !s.pinned:
		return nil, refuse(name, CheckIntegrity, nil, "its %s signature covers pack.json, not the module: pin the archive with --integrity sha256-... (the registry's version manifest gives it)", packs.SchemeCanonicalJSON)
	case v2:
		signers, verr = s.tp.verifyCanonical(pj, sig, ow.Signing.KeyID, name)
	case len(s.signers) > 0: // the detached signature verified over the tarball
		signers = s.signers
	case sig != nil:
		verr = refuse(name, CheckSignature, nil, "the detached signature does not verify over the tarball, and pack.json has no v2 signing block")
	case hasManifestSig:
		signers, verr = s.tp.verifyDetached(pj, msig, name, ref+" over "+packs.ManifestName)
	case !s.unsigned:
		verr = refuse(name, CheckUnsigned, nil, "the pack has no signature: no detached .sig and no %s in the archive", ref)
	}
	if verr != nil {
		return nil, verr
	}
	if len(signers) > 0 {
		s.signers, s.unsigned = signers, false
	}
	s.openwop = true // registry keys vouch without SLSA provenance
	return s.vouch(name)
}

// verifyCanonical verifies a v2 signature: Ed25519 over the JCS form of
// pack.json by the registry key whose name is keyID.
func (tp *trustPolicy) verifyCanonical(pj, sig []byte, keyID, name string) ([]signer, *VerifyError) {
	if len(sig) == 0 {
		return nil, refuse(name, CheckUnsigned, nil, "pack.json declares %s signing and no detached signature was given", packs.SchemeCanonicalJSON)
	}
	raw, verr := decodeEd25519Signature(sig, name)
	if verr != nil {
		return nil, verr
	}
	canon, err := jsoncanonicalizer.Transform(pj)
	if err != nil {
		return nil, refuse(name, CheckSignature, err, "pack.json has no RFC 8785 canonical form")
	}
	for _, k := range tp.registry {
		if k.name != keyID {
			continue
		}
		if !ed25519.Verify(k.pub.(ed25519.PublicKey), canon, raw) {
			return nil, refuse(name, CheckSignature, nil, "the signature does not verify over the canonical pack.json with registry key %s (a signature over the tarball is not a v2 signature)", quote(keyID))
		}
		return []signer{{display: "registry-key:" + k.name, keyID: k.id, namespaces: k.namespaces}}, nil
	}
	return nil, refuse(name, CheckSignature, nil, "signing.keyId %s names no registry key in the trust policy (packrun trust add-registry-key %s KEY --namespace ...)", quote(keyID), quote(keyID))
}

// verifyDetached returns every registry key that verifies sig over msg.
func (tp *trustPolicy) verifyDetached(msg, sig []byte, name, what string) ([]signer, *VerifyError) {
	raw, verr := decodeEd25519Signature(sig, name)
	if verr != nil {
		return nil, verr
	}
	var matched []signer
	for _, k := range tp.registry {
		if ed25519.Verify(k.pub.(ed25519.PublicKey), msg, raw) {
			matched = append(matched, signer{display: "registry-key:" + k.name, keyID: k.id, namespaces: k.namespaces})
		}
	}
	if len(matched) == 0 {
		return nil, refuse(name, CheckSignature, nil, "%s does not verify with any trusted registry key (tried %d)", what, len(tp.registry))
	}
	return matched, nil
}
