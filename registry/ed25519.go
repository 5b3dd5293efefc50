package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
)

// VerifyEd25519 verifies an openwop registry pack: sig is a detached
// Ed25519 signature over the exact tarball bytes, made by a registry key in
// the policy (Policy.RegistryKeys) that is trusted for name.
//
// sig may be the raw 64-byte signature or its standard base64 encoding
// (padded or not; surrounding whitespace such as a trailing newline is
// ignored). The two cannot be confused: base64 of 64 bytes is 86 or 88
// characters, never 64 bytes long.
//
// Every refusal is a *VerifyError matching ErrUntrusted, with openwop's
// code (VerifyError.Code) where openwop has one.
func VerifyEd25519(tarball, sig []byte, name string, p *Policy) (*Verdict, error) {
	if p == nil {
		return nil, refuse(name, CheckPolicy, nil, "no trust policy")
	}
	if err := validatePackName(name); err != nil {
		return nil, refuse(name, CheckNamespace, err, "invalid pack name")
	}
	if sig == nil {
		sig = []byte{} // an openwop pack: a missing signature is not a missing Sigstore bundle
	}
	s, err := checkSigned(context.Background(), p, Signed{Archive: tarball, Signature: sig}, VerifyOptions{}, name)
	if err != nil {
		return nil, withOpenwopCode(err)
	}
	v, err := s.vouch(name)
	return v, withOpenwopCode(err)
}

// verifyEd25519 returns every registry key in the policy that verifies sig
// over tarball; name only labels refusals.
func (tp *trustPolicy) verifyEd25519(tarball, sig []byte, name string) ([]signer, *VerifyError) {
	if len(sig) == 0 {
		return nil, refuse(name, CheckUnsigned, nil, "pack has no Ed25519 signature")
	}
	if len(tp.registry) == 0 {
		return nil, refuse(name, CheckSignature, nil, "the trust policy has no openwop registry keys")
	}
	return tp.verifyDetached(tarball, sig, name, "Ed25519 signature over the tarball")
}

func decodeEd25519Signature(sig []byte, name string) ([]byte, *VerifyError) {
	if len(sig) > MaxEd25519SignatureSize {
		return nil, refuse(name, CheckBundle, nil, "Ed25519 signature is %d bytes, more than the %d allowed", len(sig), MaxEd25519SignatureSize)
	}
	if len(sig) == ed25519.SignatureSize {
		return sig, nil
	}
	text := bytes.TrimSpace(sig)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		raw := make([]byte, enc.DecodedLen(len(text)))
		n, err := enc.Decode(raw, text)
		if err == nil && n == ed25519.SignatureSize {
			return raw[:n], nil
		}
	}
	return nil, refuse(name, CheckBundle, nil, "Ed25519 signature is neither 64 raw bytes nor base64 of 64 bytes (%d bytes given)", len(sig))
}
