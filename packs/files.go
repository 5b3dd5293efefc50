package packs

// Files says where a pack file's signatures are and how to judge them.
type Files struct {
	// Bundle is the Sigstore bundle over the archive (default
	// FILE.sigstore.json beside the pack).
	Bundle string
	// Provenance is the provenance bundle (default
	// FILE.provenance.sigstore.json beside the pack).
	Provenance string
	// Signature is the detached Ed25519 signature of an openwop registry
	// .tgz (default FILE.sig beside it); when present, it is verified
	// instead of the bundles.
	Signature string
	// Integrity pins the archive, "sha256-<base64>" of its bytes (an
	// openwop registry's version manifest "integrity"); required for an
	// openwop pack signed over its pack.json only.
	Integrity string
	// TrustFile is the trust policy (default the host's trust policy file).
	TrustFile string
	// AllowUnsignedUnsafe accepts a pack that has no signature at all.
	AllowUnsignedUnsafe bool
}
