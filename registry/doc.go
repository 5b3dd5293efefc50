// Package registry decides whether a pack may be trusted: it signs pack
// archives (a Sigstore bundle over the archive plus a second bundle carrying
// an in-toto SLSA provenance statement), verifies them with sigstore-go
// against a trust policy ($PACKRUN_HOME/trust.json) whose keys and keyless
// identities are each limited to pack namespaces, and verifies the Ed25519
// signatures of openwop registry packs: over the tarball (the v1 registry
// tree), over the RFC 8785 form of pack.json (v2 ed25519-canonical-json,
// by the key its keyId names) or over pack.json as stored (v1
// pack.json.sig); the last two only for an archive pinned by its integrity
// (sha256-<base64>), since they do not cover the module (openwop.go).
//
// Everything is secure by default: an empty policy trusts nothing, provenance
// is required unless the policy says otherwise, and the one option that
// accepts unsigned packs is named AllowUnsignedUnsafe. Untrusted input is
// bounded by the limits in limits.go. A signature is checked over the
// archive's bytes before the archive is opened (VerifyRequest): a pack no
// trusted signer signed is never decompressed. Every refusal is a
// *VerifyError that errors.Is ErrUntrusted, one line with its echoed values
// clipped.
//
// It holds trust, signing and verification only, with typed inputs (a
// Signed names the archive and each of its signatures, as received) and no
// storage of its own: installing a verified pack, the installed-pack index
// and the pack blobs are the host store's (host.Packs, behind
// packrun.Host.Install).
package registry
