package registry

// Size limits for untrusted input, in one place. Anything larger is refused
// before it is parsed.
const (
	// MaxBundleSize bounds a Sigstore bundle (signature or provenance) in
	// JSON form. Real bundles are a few KiB; a keyless bundle with a
	// certificate, a Rekor entry and an RFC 3161 timestamp stays under 16 KiB.
	MaxBundleSize = 1 << 20

	// MaxPolicySize bounds trust.json.
	MaxPolicySize = 1 << 20

	// MaxTrustedRootSize bounds a trusted_root.json (the public-good Sigstore
	// root is ≈ 7 KiB).
	MaxTrustedRootSize = 1 << 20

	// MaxKeyFileSize bounds a PEM key file.
	MaxKeyFileSize = 64 << 10

	// MaxEd25519SignatureSize bounds a detached openwop signature file
	// (64 raw bytes, or 88 characters of base64 plus whitespace).
	MaxEd25519SignatureSize = 1 << 10

	// maxNamespacePatterns bounds the namespaces of one policy entry, and
	// maxNameLength the length of a pack name or a pattern.
	maxNamespacePatterns = 256
	maxNameLength        = 255
)
