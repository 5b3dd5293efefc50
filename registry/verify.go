package registry

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/packrun/packrun/packs"
)

// VerifyOptions adjust Verify. The zero value is the secure default.
type VerifyOptions struct {
	// AllowUnsignedUnsafe accepts a pack that comes with no signature
	// bundle at all (the verdict says Unsigned). It does not weaken
	// anything else: a bundle that is present must verify, and provenance
	// that is present must verify. Provenance is not required for an
	// unsigned pack. Meant for local development only.
	AllowUnsignedUnsafe bool
}

// Verdict is who vouched for a pack.
type Verdict struct {
	// Signer is "key:<name>", "identity:<name> (<issuer> <subject>)",
	// "registry-key:<name>", or "unsigned" (AllowUnsignedUnsafe).
	Signer string
	// KeyID identifies the signing key: for keys, base64 of the SHA-256 of
	// the PKIX public key (the hint packrun writes into bundles); for
	// identities, "sha256:<hex>" of the leaf certificate.
	KeyID string
	// Unsigned is true only when AllowUnsignedUnsafe let an unsigned pack
	// through.
	Unsigned bool
	// Provenance is the verified SLSA provenance, nil if none was given
	// and none was required.
	Provenance *Provenance
}

// Signed is a pack archive with its signatures, exactly as received: what
// Verify and VerifyRequest judge (and what is stored once trusted). Naming
// each part keeps a signature bundle from being passed as provenance, or
// the other way round.
type Signed struct {
	Archive    []byte // the pack archive (.pack, a gzipped tar)
	Bundle     []byte // Sigstore bundle with a message signature over Archive (nil: unsigned)
	Provenance []byte // Sigstore bundle of the SLSA provenance statement (nil: none)
	// Signature is the detached Ed25519 signature of an openwop registry
	// pack (see VerifyEd25519); when set it is verified instead of Bundle,
	// and Provenance is not looked at.
	Signature []byte
	// Integrity, when set, pins the archive: "sha256-<base64>" of its
	// bytes, as an openwop registry's version manifest or a pack-lock.json
	// gives it. An archive with another digest is refused before anything
	// else. It is what lets an openwop pack signed over its pack.json only
	// (v1 pack.json.sig, v2 ed25519-canonical-json) be trusted: such a
	// signature does not cover the module.
	Integrity string
}

// Verify decides whether a pack archive may be trusted under policy p as
// the pack name, without opening the archive (VerifyRequest opens it and
// takes the name from its manifest). s.Bundle is the Sigstore bundle (JSON)
// with a message signature over s.Archive; s.Provenance is the Sigstore
// bundle with the DSSE-enveloped SLSA provenance statement (nil if there is
// none); s.Signature, when set, is an openwop Ed25519 signature checked
// instead.
//
// The signature must verify against a trusted key (matched by the bundle's
// key hint, else each trusted key in turn) or, for a keyless bundle, against
// the policy's pinned trusted root with a trusted identity; the signer must
// be trusted for name's namespace. Provenance (required when
// p.RequireProvenance or p.BuilderIDs is set, otherwise checked when given)
// must be signed by a signer trusted for name, have predicate type SLSA
// Provenance v1, name this pack with this archive's sha256 as its subject,
// and, if p.BuilderIDs is not empty, name one of those builders.
//
// Every refusal is a *VerifyError matching ErrUntrusted.
func Verify(ctx context.Context, p *Policy, s Signed, name string, opts VerifyOptions) (*Verdict, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, refuse(name, CheckPolicy, nil, "no trust policy")
	}
	if err := validatePackName(name); err != nil {
		return nil, refuse(name, CheckNamespace, err, "invalid pack name")
	}
	sa, err := checkSigned(ctx, p, s, opts, name)
	if err != nil {
		return nil, err
	}
	return sa.vouch(name)
}

// readArchive is packs.Read; tests count the archives opened.
var readArchive = packs.Read

// VerifyRequest checks a pack's archive and signatures against policy
// without storing anything. The signature is checked over the archive bytes
// first, against every trusted signer: an archive no trusted signer signed
// is refused before it is decompressed, so an untrusted gzip bomb costs no
// more than its own bytes. Then the archive is opened (within
// packs.DefaultLimits()), and the signer must be trusted for the name its
// manifest gives. An unsigned pack is opened only with AllowUnsignedUnsafe.
func VerifyRequest(ctx context.Context, p *Policy, s Signed, opts VerifyOptions) (*Verdict, *packs.Archive, error) {
	sa, err := checkSigned(ctx, p, s, opts, "")
	if err != nil {
		var ve *VerifyError
		if errors.As(err, &ve) && ve.Pack == "" {
			ve.Archive = digestOrEmpty(s.Archive)
		}
		if s.Signature != nil || s.Integrity != "" {
			err = withOpenwopCode(err)
		}
		return nil, nil, err
	}
	arch, err := readArchive(bytes.NewReader(s.Archive), packs.DefaultLimits())
	if err != nil {
		return nil, nil, err
	}
	var v *Verdict
	switch {
	case arch.Manifest.Openwop != nil:
		v, err = sa.vouchOpenwop(arch, s.Signature)
		err = withOpenwopCode(err)
	default:
		v, err = sa.vouch(arch.Manifest.Name)
	}
	if err == nil {
		err = p.CheckHTTPHosts(arch.Manifest.Name, arch.Manifest.Grants.HTTP)
	}
	if err != nil {
		return nil, nil, err
	}
	return v, arch, nil
}

// digestOrEmpty is the hex sha256 of b, "" for nil.
func digestOrEmpty(b []byte) string {
	if b == nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// short is the first 12 hex digits of a digest, for messages.
func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// signedArchive is an archive whose signature verified (or that is
// unsigned and let through by AllowUnsignedUnsafe), before it is opened: who
// signed it is known, which pack it is is not yet. vouch finishes the
// verification once the manifest has named the pack.
type signedArchive struct {
	policy *Policy
	tp     *trustPolicy
	digest []byte // sha256 of the archive
	// signers are every policy entry that verified the signature; vouch
	// picks one trusted for the pack's name. Empty when unsigned.
	signers  []signer
	unsigned bool
	// provenance is checked by vouch; openwop (Ed25519) packs have none.
	provenance []byte
	openwop    bool
	// pinnedOnly: the archive's digest matched Signed.Integrity and no
	// signature verified over its bytes; only an openwop pack.json
	// signature (vouchOpenwop) can vouch for it.
	pinnedOnly bool
	// pinned: the archive's digest matched Signed.Integrity.
	pinned bool
}

// checkSigned verifies the signature of req over the archive bytes against
// every trusted signer, without looking inside the archive; name, when
// known, only labels refusals. An archive no trusted signer signed is
// refused here, so it is never decompressed.
func checkSigned(ctx context.Context, p *Policy, req Signed, opts VerifyOptions, name string) (*signedArchive, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p == nil {
		return nil, refuse(name, CheckPolicy, nil, "no trust policy")
	}
	tp, err := compilePolicy(p)
	if err != nil {
		return nil, refuse(name, CheckPolicy, err, "trust policy is unusable")
	}
	sum := sha256.Sum256(req.Archive)
	s := &signedArchive{policy: p, tp: tp, digest: sum[:], provenance: req.Provenance}
	pinned := req.Integrity != ""
	if pinned {
		if verr := checkIntegrity(req.Integrity, s.digest, name); verr != nil {
			return nil, verr
		}
		s.pinned = true
	}
	switch {
	case req.Signature != nil:
		signers, verr := tp.verifyEd25519(req.Archive, req.Signature, name)
		switch {
		case verr != nil && pinned && verr.Check == CheckSignature:
			// Perhaps an openwop v2 signature over pack.json: the pin
			// makes the archive safe to open and judge (vouchOpenwop).
			s.pinnedOnly = true
		case verr != nil:
			if verr.Check == CheckSignature {
				verr.Reason += "; an openwop v2 signature (over pack.json) is checked only when the archive is pinned by its integrity (--integrity sha256-...)"
			}
			return nil, verr
		}
		s.signers, s.openwop, s.provenance = signers, true, nil
	case len(req.Bundle) == 0 && pinned:
		s.pinnedOnly, s.unsigned = true, opts.AllowUnsignedUnsafe
	case len(req.Bundle) == 0:
		if !opts.AllowUnsignedUnsafe {
			return nil, refuse(name, CheckUnsigned, nil, "pack has no signature bundle (an openwop pack signed over its pack.json is checked only when pinned by its integrity: --integrity sha256-...)")
		}
		s.unsigned = true
	default:
		b, verr := parseBundle(req.Bundle, name, "signature bundle")
		if verr != nil {
			return nil, verr
		}
		if b.GetMessageSignature() == nil {
			return nil, refuse(name, CheckBundle, nil, "signature bundle holds a DSSE attestation, not a signature over the archive (was the provenance bundle passed as the signature?)")
		}
		if md := b.GetMessageSignature().GetMessageDigest(); md != nil && md.GetAlgorithm() == protocommon.HashAlgorithm_SHA2_256 &&
			len(md.GetDigest()) == sha256.Size && !bytes.Equal(md.GetDigest(), s.digest) {
			return nil, refuse(name, CheckSignature, ErrChangedSinceSigned, "the bundle signs sha256:%s, the archive is sha256:%s",
				short(hex.EncodeToString(md.GetDigest())), short(hex.EncodeToString(s.digest)))
		}
		signers, verr := tp.verifyEntity(b, name, "signature", func() verify.ArtifactPolicyOption {
			return verify.WithArtifact(bytes.NewReader(req.Archive))
		})
		if verr != nil {
			return nil, verr
		}
		s.signers = signers
	}
	return s, nil
}

// vouch finishes verification for the pack name the archive's manifest
// gives: the signer must be trusted for name, and provenance, when given or
// required, must verify for name and this archive.
func (s *signedArchive) vouch(name string) (*Verdict, error) {
	if err := validatePackName(name); err != nil {
		return nil, refuse(name, CheckNamespace, err, "invalid pack name")
	}
	var v Verdict
	switch {
	case s.unsigned:
		v.Signer, v.Unsigned = "unsigned", true
	case len(s.signers) == 0: // pinned only: no signature verified over the archive
		return nil, refuse(name, CheckSignature, nil, "no trusted signature covers the archive (an integrity pin is not a signature)")
	default:
		who, verr := permit(s.signers, name, "signature")
		if verr != nil {
			return nil, verr
		}
		v.Signer, v.KeyID = who.display, who.keyID
	}
	if s.openwop {
		return &v, nil
	}
	p := s.policy
	needProvenance := (p.RequireProvenance || len(p.BuilderIDs) > 0) && !v.Unsigned
	if len(s.provenance) == 0 {
		if needProvenance {
			return nil, refuse(name, CheckProvenance, nil, "the trust policy requires SLSA provenance and none was given")
		}
		return &v, nil
	}
	prov, verr := s.tp.verifyProvenance(s.provenance, name, s.digest)
	if verr != nil {
		return nil, verr
	}
	if len(p.BuilderIDs) > 0 && !slices.Contains(p.BuilderIDs, prov.BuilderID) {
		return nil, refuse(name, CheckBuilder, nil, "builder %s is not one of the policy's builderIds %s", quote(prov.BuilderID), list(p.BuilderIDs))
	}
	v.Provenance = prov
	return &v, nil
}

// permit returns the first of signers trusted for name.
func permit(signers []signer, name, what string) (*signer, *VerifyError) {
	for i := range signers {
		if permitted(signers[i].namespaces, name) {
			return &signers[i], nil
		}
	}
	return nil, refuse(name, CheckNamespace, nil, "%s is by %s, which the trust policy allows only for %s", what, signers[0].display, list(signers[0].namespaces))
}

func (tp *trustPolicy) verifyProvenance(data []byte, name string, digest []byte) (*Provenance, *VerifyError) {
	b, verr := parseBundle(data, name, "provenance bundle")
	if verr != nil {
		return nil, verr
	}
	env := b.GetDsseEnvelope()
	if env == nil {
		return nil, refuse(name, CheckBundle, nil, "provenance bundle holds a message signature, not a DSSE attestation (was the signature bundle passed as provenance?)")
	}
	if env.PayloadType != InTotoPayloadType {
		return nil, refuse(name, CheckProvenance, nil, "DSSE payloadType is %s, want %q", quote(env.PayloadType), InTotoPayloadType)
	}
	// Check the (still unverified) statement first only to give a precise
	// reason; nothing from it is used unless the signature verifies below.
	hexDigest := hex.EncodeToString(digest)
	if _, check, reason := checkStatement(env.Payload, name, hexDigest); reason != "" {
		return nil, refuse(name, check, nil, "%s", reason)
	}
	signers, verr := tp.verifyEntity(b, name, "provenance signature", func() verify.ArtifactPolicyOption {
		return verify.WithArtifactDigest("sha256", digest)
	})
	if verr != nil {
		if verr.Check == CheckSignature {
			verr.Check = CheckProvenance
		}
		return nil, verr
	}
	s, verr := permit(signers, name, "provenance signature")
	if verr != nil {
		return nil, verr
	}
	prov, check, reason := checkStatement(env.Payload, name, hexDigest)
	if reason != "" {
		return nil, refuse(name, check, nil, "%s", reason)
	}
	prov.Signer = s.display
	return prov, nil
}

// parseBundle decodes and validates a Sigstore bundle (v0.1–v0.3 JSON).
func parseBundle(data []byte, pack, what string) (*bundle.Bundle, *VerifyError) {
	if len(data) > MaxBundleSize {
		return nil, refuse(pack, CheckBundle, nil, "%s is %d bytes, more than the %d allowed", what, len(data), MaxBundleSize)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(data); err != nil {
		return nil, refuse(pack, CheckBundle, err, "%s is not a valid Sigstore bundle", what)
	}
	return &b, nil
}

// trustPolicy is a Policy with its keys parsed and regexps compiled.
type trustPolicy struct {
	keys       []trustedKey
	identities []trustedIdentity
	registry   []trustedKey
	root       func() (root.TrustedMaterial, error)
}

type trustedKey struct {
	name       string
	pub        crypto.PublicKey
	der        []byte
	id         string
	namespaces []string
}

type trustedIdentity struct {
	name       string
	identity   verify.CertificateIdentity
	namespaces []string
}

// signer is a policy entry that verified a signature.
type signer struct {
	display    string
	keyID      string
	namespaces []string
}

func compilePolicy(p *Policy) (*trustPolicy, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	tp := &trustPolicy{}
	for _, k := range p.Keys {
		pub, err := parsePublicKeyPEM([]byte(k.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Name, err)
		}
		tk, err := newTrustedKey(k.Name, pub, k.Namespaces)
		if err != nil {
			return nil, err
		}
		tp.keys = append(tp.keys, tk)
	}
	for _, k := range p.RegistryKeys {
		pub, err := parseEd25519Key(k.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("registry key %q: %w", k.Name, err)
		}
		tk, err := newTrustedKey(k.Name, pub, k.Namespaces)
		if err != nil {
			return nil, err
		}
		tp.registry = append(tp.registry, tk)
	}
	for _, i := range p.Identities {
		sanValue, sanRegexp := i.Subject, ""
		if i.SubjectRegexp != "" {
			sanValue, sanRegexp = "", anchor(i.SubjectRegexp)
		}
		id, err := verify.NewShortCertificateIdentity(i.Issuer, "", sanValue, sanRegexp)
		if err != nil {
			return nil, fmt.Errorf("identity %q: %w", i.Name, err)
		}
		tp.identities = append(tp.identities, trustedIdentity{name: i.Name, identity: id, namespaces: i.Namespaces})
	}
	if ref := p.TrustedRoot; ref != nil {
		var loaded root.TrustedMaterial
		tp.root = func() (root.TrustedMaterial, error) {
			if loaded != nil {
				return loaded, nil
			}
			data := []byte(ref.JSON)
			if len(data) == 0 {
				var err error
				data, err = readLimited(p.resolve(ref.Path), MaxTrustedRootSize)
				if err != nil {
					return nil, fmt.Errorf("trusted root: %w", err)
				}
			} else if len(data) > MaxTrustedRootSize {
				return nil, fmt.Errorf("inline trusted root is larger than %d bytes", MaxTrustedRootSize)
			}
			tr, err := root.NewTrustedRootFromJSON(data)
			if err != nil {
				return nil, fmt.Errorf("trusted root: %w", err)
			}
			loaded = tr
			return tr, nil
		}
	}
	return tp, nil
}

func newTrustedKey(name string, pub crypto.PublicKey, namespaces []string) (trustedKey, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return trustedKey{}, fmt.Errorf("key %q: %w", name, err)
	}
	id, err := keyID(pub)
	if err != nil {
		return trustedKey{}, fmt.Errorf("key %q: %w", name, err)
	}
	return trustedKey{name: name, pub: pub, der: der, id: id, namespaces: namespaces}, nil
}

// verifyEntity verifies a parsed bundle's signature with sigstore-go and
// returns every policy entry that vouches for it (see permit for the one
// trusted for a pack's name). name only labels refusals. artifact is called
// once per verification attempt (readers are consumed).
func (tp *trustPolicy) verifyEntity(b *bundle.Bundle, name, what string, artifact func() verify.ArtifactPolicyOption) ([]signer, *VerifyError) {
	vc, err := b.VerificationContent()
	if err != nil {
		return nil, refuse(name, CheckBundle, err, "%s: no verification material", what)
	}
	var matched []signer
	if vc.Certificate() != nil {
		matched, err = tp.verifyKeyless(b, artifact)
	} else {
		hint := ""
		if pk := vc.PublicKey(); pk != nil {
			hint = pk.Hint()
		}
		matched, err = tp.verifyWithKeys(b, hint, artifact)
	}
	if err != nil {
		var ve *VerifyError
		if errors.As(err, &ve) {
			ve.Pack = name
			return nil, ve
		}
		return nil, refuse(name, CheckSignature, err, "%s does not verify", what)
	}
	return matched, nil
}

// verifyWithKeys verifies a public-key bundle against the policy's keys:
// the key whose id equals the bundle's hint first, then every other key
// (cosign and other signers do not all use the same hint scheme). It
// returns every policy key equal to the one that verified, so that the same
// key listed under several names can be matched to the right namespace.
func (tp *trustPolicy) verifyWithKeys(b *bundle.Bundle, hint string, artifact func() verify.ArtifactPolicyOption) ([]signer, error) {
	if len(tp.keys) == 0 {
		return nil, &VerifyError{Check: CheckSignature, Reason: "bundle is signed with a key, and the trust policy trusts no keys"}
	}
	order := make([]int, 0, len(tp.keys))
	for i, k := range tp.keys {
		if hint != "" && k.id == hint {
			order = append(order, i)
		}
	}
	for i, k := range tp.keys {
		if hint == "" || k.id != hint {
			order = append(order, i)
		}
	}
	var firstErr error
	for _, i := range order {
		k := tp.keys[i]
		err := verifyWithKey(b, k.pub, artifact())
		if err == nil {
			var out []signer
			for _, o := range tp.keys {
				if bytes.Equal(o.der, k.der) {
					out = append(out, signer{display: "key:" + o.name, keyID: o.id, namespaces: o.namespaces})
				}
			}
			return out, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	reason := fmt.Sprintf("no trusted key verifies it (tried %d; bundle key hint %s)", len(order), quote(hint))
	return nil, &VerifyError{Check: CheckSignature, Reason: reason, Err: firstErr}
}

func verifyWithKey(b *bundle.Bundle, pub crypto.PublicKey, artifact verify.ArtifactPolicyOption) error {
	sv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return err
	}
	key := root.NewExpiringKey(sv, timeZero, timeZero)
	tm := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
	// A key is trusted by itself, not by when it signed: no timestamp
	// or transparency-log entry is required (offline, key-based).
	v, err := verify.NewVerifier(tm, verify.WithNoObserverTimestamps(), verify.WithoutStatementPredicate())
	if err != nil {
		return err
	}
	_, err = v.Verify(b, verify.NewPolicy(artifact, verify.WithKey()))
	return err
}

// verifyKeyless verifies a certificate bundle against the pinned trusted
// root and the policy's identities. What the root lists decides what the
// bundle must carry: a Rekor log means a verified transparency-log entry, a
// CT log means an embedded SCT; and the certificate must have been valid at
// a verified observer time (Rekor integrated time or RFC 3161 timestamp).
func (tp *trustPolicy) verifyKeyless(b *bundle.Bundle, artifact func() verify.ArtifactPolicyOption) ([]signer, error) {
	if len(tp.identities) == 0 {
		return nil, &VerifyError{Check: CheckSignature, Reason: "bundle is signed keyless (certificate), and the trust policy trusts no identities"}
	}
	if tp.root == nil {
		return nil, &VerifyError{Check: CheckPolicy, Reason: "keyless bundle, and the trust policy has no trustedRoot"}
	}
	tm, err := tp.root()
	if err != nil {
		return nil, &VerifyError{Check: CheckPolicy, Reason: "cannot load the pinned trusted root", Err: err}
	}
	vopts := []verify.VerifierOption{verify.WithObserverTimestamps(1), verify.WithoutStatementPredicate()}
	if len(tm.RekorLogs()) > 0 {
		vopts = append(vopts, verify.WithTransparencyLog(1))
	}
	if len(tm.CTLogs()) > 0 {
		vopts = append(vopts, verify.WithSignedCertificateTimestamps(1))
	}
	v, err := verify.NewVerifier(tm, vopts...)
	if err != nil {
		return nil, err
	}
	popts := make([]verify.PolicyOption, 0, len(tp.identities))
	for _, id := range tp.identities {
		popts = append(popts, verify.WithCertificateIdentity(id.identity))
	}
	res, err := v.Verify(b, verify.NewPolicy(artifact(), popts...))
	if err != nil {
		return nil, &VerifyError{Check: CheckSignature, Reason: "keyless signature does not verify against the pinned trusted root and trusted identities", Err: err}
	}
	if res.Signature == nil || res.Signature.Certificate == nil {
		return nil, errors.New("verified keyless bundle has no certificate summary")
	}
	cert := *res.Signature.Certificate
	leaf, _ := b.VerificationContent()
	fp := ""
	if leaf != nil && leaf.Certificate() != nil {
		s := sha256.Sum256(leaf.Certificate().Raw)
		fp = "sha256:" + hex.EncodeToString(s[:])
	}
	var out []signer
	for _, id := range tp.identities {
		if id.identity.Verify(cert) == nil {
			out = append(out, signer{
				display:    fmt.Sprintf("identity:%s (%s %s)", id.name, cert.Extensions.Issuer, cert.SubjectAlternativeName),
				keyID:      fp,
				namespaces: id.namespaces,
			})
		}
	}
	if len(out) == 0 { // sigstore-go matched one; cannot happen
		return nil, errors.New("no trusted identity matches the certificate")
	}
	return out, nil
}

// timeZero leaves a trusted key without a validity window.
var timeZero time.Time
