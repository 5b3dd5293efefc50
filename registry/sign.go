package registry

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"google.golang.org/protobuf/encoding/protojson"
)

// SignOptions describe the build that produced the archive; they become the
// SLSA provenance predicate.
type SignOptions struct {
	// BuilderID identifies who built the pack (runDetails.builder.id), e.g.
	// "https://github.com/acme/packs/.github/workflows/release.yml" or
	// "local:alice@laptop". Required.
	BuilderID string
	// BuildType is buildDefinition.buildType; DefaultBuildType if empty.
	BuildType string
	// SourceDigest is the sha256 (lowercase hex) of the source the pack was
	// built from; recorded as resolvedDependencies[{uri:"file:source"}].
	// Optional.
	SourceDigest string
	// BuiltAt is recorded as runDetails.metadata startedOn/finishedOn
	// (RFC 3339, UTC, seconds). The current time if zero.
	BuiltAt time.Time
}

var sha256Hex = lazyRegexp(`^[0-9a-f]{64}$`)

// Sign signs a pack archive with an ECDSA P-256 key and returns two Sigstore
// bundles (v0.3, JSON): bundle, a message signature over the archive, and
// provenance, a DSSE envelope holding an in-toto Statement v1 whose subject
// is {name, sha256 of archive} with a SLSA Provenance v1 predicate built from
// opts. Both carry the key's hint (base64 SHA-256 of the PKIX public key)
// and no transparency-log entry, so they verify offline with
// `cosign verify-blob` / `cosign verify-blob-attestation --key ...
// --insecure-ignore-tlog=true`.
func Sign(ctx context.Context, archive []byte, name string, key crypto.Signer, opts SignOptions) (bundle, provenance []byte, err error) {
	if key == nil {
		return nil, nil, errors.New("sign: no key")
	}
	if err := validatePackName(name); err != nil {
		return nil, nil, fmt.Errorf("sign: %w", err)
	}
	if opts.BuilderID == "" {
		return nil, nil, fmt.Errorf("sign %s: SignOptions.BuilderID is required", name)
	}
	if opts.BuildType == "" {
		opts.BuildType = DefaultBuildType
	}
	if opts.SourceDigest != "" && !sha256Hex().MatchString(opts.SourceDigest) {
		return nil, nil, fmt.Errorf("sign %s: SourceDigest %q is not a lowercase hex sha256", name, opts.SourceDigest)
	}
	if opts.BuiltAt.IsZero() {
		opts.BuiltAt = time.Now()
	}
	opts.BuiltAt = opts.BuiltAt.UTC().Truncate(time.Second)

	kp, err := newKeypair(key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: %w", name, err)
	}
	sum := sha256.Sum256(archive)

	bundle, err = signBundle(ctx, &sign.PlainData{Data: archive}, kp)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: %w", name, err)
	}
	stmt, err := buildStatement(name, hex.EncodeToString(sum[:]), opts)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: provenance: %w", name, err)
	}
	provenance, err = signBundle(ctx, &sign.DSSEData{Data: stmt, PayloadType: InTotoPayloadType}, kp)
	if err != nil {
		return nil, nil, fmt.Errorf("sign %s: provenance: %w", name, err)
	}
	return bundle, provenance, nil
}

func signBundle(ctx context.Context, content sign.Content, kp sign.Keypair) ([]byte, error) {
	var b *protobundle.Bundle
	b, err := sign.Bundle(content, kp, sign.BundleOptions{Context: ctx})
	if err != nil {
		return nil, err
	}
	return protojson.Marshal(b)
}
