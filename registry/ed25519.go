package registry

import (
	"bytes"
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
// Every refusal is a *VerifyError matching ErrUntrusted.
func VerifyEd25519(tarball, sig []byte, name string, p *Policy) (*Verdict, error) {
	if p == nil {
		return nil, refuse(name, CheckPolicy, nil, "no trust policy")
	}
	if err := validatePackName(name); err != nil {
		return nil, refuse(name, CheckNamespace, err, "invalid pack name")
	}
	tp, err := compilePolicy(p)
	if err != nil {
		return nil, refuse(name, CheckPolicy, err, "trust policy is unusable")
	}
	if len(sig) == 0 {
		return nil, refuse(name, CheckUnsigned, nil, "pack has no Ed25519 signature")
	}
	raw, verr := decodeEd25519Signature(sig, name)
	if verr != nil {
		return nil, verr
	}
	if len(tp.registry) == 0 {
		return nil, refuse(name, CheckSignature, nil, "the trust policy has no openwop registry keys")
	}
	var matched []trustedKey
	for _, k := range tp.registry {
		if ed25519.Verify(k.pub.(ed25519.PublicKey), tarball, raw) {
			matched = append(matched, k)
		}
	}
	if len(matched) == 0 {
		return nil, refuse(name, CheckSignature, nil, "Ed25519 signature does not verify with any trusted registry key (tried %d)", len(tp.registry))
	}
	for _, k := range matched {
		if permitted(k.namespaces, name) {
			return &Verdict{Signer: "registry-key:" + k.name, KeyID: k.id}, nil
		}
	}
	return nil, refuse(name, CheckNamespace, nil, "signature is by registry-key:%s, which the trust policy allows only for %v", matched[0].name, matched[0].namespaces)
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
