package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/credentials"
)

// Media types. A pack is an OCI image manifest (v1.1 artifact form: empty
// config, artifactType) with one layer, the .pack archive; its bundles are
// manifests whose subject is the pack's manifest, as cosign stores its
// Sigstore bundles.
const (
	// ArtifactType is the pack manifest's artifactType.
	ArtifactType = "application/vnd.packrun.pack.v1"
	// PackMediaType is the media type of the pack layer (the .pack file:
	// a gzip'd tar).
	PackMediaType = "application/vnd.packrun.pack.v1.tar+gzip"
	// BundleType is both the artifactType of a bundle referrer and the
	// media type of its one layer (cosign's choice).
	BundleType = "application/vnd.dev.sigstore.bundle.v0.3+json"

	// AnnotationBundleContent and AnnotationPredicateType are cosign's
	// annotations on a bundle referrer.
	AnnotationBundleContent = "dev.sigstore.bundle.content"
	AnnotationPredicateType = "dev.sigstore.bundle.predicateType"
	// AnnotationPackName and AnnotationPackVersion name the pack on its
	// manifest.
	AnnotationPackName    = "dev.packrun.pack.name"
	AnnotationPackVersion = "dev.packrun.pack.version"

	contentMessageSignature = "message-signature"
	contentDSSE             = "dsse-envelope"
	// ProvenancePredicateType is the predicate of the provenance bundle.
	ProvenancePredicateType = "https://slsa.dev/provenance/v1"
)

// Errors, matched with errors.Is.
var (
	// ErrRefused: the registry answered something that is not a pack of
	// ours or does not match its digest or size (tampered, truncated,
	// garbage, over a limit).
	ErrRefused = errors.New("refused registry answer")
	// ErrNotFound: the registry has no such repository, tag or digest.
	ErrNotFound = errors.New("not found in the registry")
	// ErrUsage: the reference or the options are wrong.
	ErrUsage = errors.New("bad OCI reference")
)

// Limits bound what is read from a registry; anything larger is refused
// before it is read.
type Limits struct {
	ManifestBytes int64 // a manifest or referrers index
	ArchiveBytes  int64 // the pack layer
	BundleBytes   int64 // a bundle layer
	Referrers     int   // bundle referrers of one kind considered
}

// DefaultLimits: manifests of a few KiB are the norm, so 256 KiB leaves
// room for long referrer lists.
func DefaultLimits(archiveBytes, bundleBytes int64) Limits {
	return Limits{ManifestBytes: 256 << 10, ArchiveBytes: archiveBytes, BundleBytes: bundleBytes, Referrers: 4}
}

// Options say how to reach a registry.
type Options struct {
	// PlainHTTPUnsafe speaks plain HTTP to a registry that is not on a
	// loopback address (loopback registries are always spoken to over
	// plain HTTP).
	PlainHTTPUnsafe bool
	// DockerConfig is the Docker config file whose credentials are used
	// ("": $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
	DockerConfig string
	// Transport carries the requests (nil: http.DefaultTransport).
	Transport http.RoundTripper
	Limits    Limits
}

// Pack is what travels: the archive and its Sigstore bundles.
type Pack struct {
	Name, Version string
	Archive       []byte
	Bundle        []byte // the signature bundle over Archive
	Provenance    []byte // the provenance bundle (may be nil)
}

// Pulled is a pack fetched from a registry, every byte checked against its
// digest. The bundles are candidates: whoever can judge them picks.
type Pulled struct {
	Ref         string // the reference pinned by digest
	Digest      string // the pack manifest's digest
	Name        string // from the manifest's annotations (unverified)
	Version     string
	Archive     []byte
	Bundles     [][]byte
	Provenances [][]byte
}

// maxRedirects bounds the redirects of one request (registries redirect
// blob reads to storage, once).
const maxRedirects = 5

// open returns the repository ref names and the parsed reference.
func open(ref string, o Options) (*remote.Repository, registry.Reference, error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return nil, r, fmt.Errorf("%s: %w: %s", ref, ErrUsage, cleanMsg(err))
	}
	repo, err := remote.NewRepository(r.Registry + "/" + r.Repository)
	if err != nil {
		return nil, r, fmt.Errorf("%s: %w: %s", ref, ErrUsage, cleanMsg(err))
	}
	repo.PlainHTTP = o.PlainHTTPUnsafe || isLoopback(r.Host())
	repo.MaxMetadataBytes = o.Limits.ManifestBytes
	repo.SkipReferrersGC = true
	var store credentials.Store
	if o.DockerConfig != "" {
		store, err = credentials.NewStore(o.DockerConfig, credentials.StoreOptions{})
	} else {
		store, err = credentials.NewStoreFromDocker(credentials.StoreOptions{})
	}
	if err != nil {
		return nil, r, fmt.Errorf("%s: docker config: %s", ref, cleanMsg(err))
	}
	t := o.Transport
	if t == nil {
		// A registry that accepts the connection and never answers must
		// not hang the command; bodies are bounded by the context.
		dt := http.DefaultTransport.(*http.Transport).Clone()
		dt.ResponseHeaderTimeout = time.Minute
		t = dt
	}
	client := &auth.Client{
		Client: &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			return nil
		}},
		Cache:      auth.NewCache(),
		Credential: credentials.Credential(store),
	}
	client.SetUserAgent("packrun")
	repo.Client = client
	return repo, r, nil
}

// isLoopback reports whether host (with or without port) is localhost or
// a loopback address.
func isLoopback(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Push stores p at ref (a tag; with none, the pack's version is the tag)
// with its bundles as referrers, and returns the pack manifest's reference
// pinned by digest (REGISTRY/REPO@sha256:…).
// The manifests carry no time, so pushing the same pack twice gives the
// same digests and adds no referrer.
func Push(ctx context.Context, ref string, p Pack, o Options) (string, error) {
	repo, r, err := open(ref, o)
	if err != nil {
		return "", err
	}
	if r.Reference == "" {
		r.Reference = p.Version
	}
	if _, err := r.Digest(); err == nil {
		return "", fmt.Errorf("push %s: %w: push to a tag, not a digest", ref, ErrUsage)
	}
	if err := r.ValidateReferenceAsTag(); err != nil {
		return "", fmt.Errorf("push %s: %w: %s", ref, ErrUsage, cleanMsg(err))
	}
	fail := func(err error) (string, error) { return "", fmt.Errorf("push %s: %w", r, classify(err)) }
	empty := ocispec.DescriptorEmptyJSON
	layer := content.NewDescriptorFromBytes(PackMediaType, p.Archive)
	layer.Annotations = map[string]string{ocispec.AnnotationTitle: p.Name + "-" + p.Version + ".pack"}
	for _, b := range []struct {
		d ocispec.Descriptor
		b []byte
	}{{empty, empty.Data}, {layer, p.Archive}} {
		if err := pushBlob(ctx, repo, b.d, b.b); err != nil {
			return fail(err)
		}
	}
	m := manifest(ArtifactType, layer, nil, map[string]string{AnnotationPackName: p.Name, AnnotationPackVersion: p.Version})
	md, mb, err := encode(m)
	if err != nil {
		return fail(err)
	}
	if err := repo.PushReference(ctx, md, bytes.NewReader(mb), r.Reference); err != nil {
		return fail(err)
	}
	subject := md
	subject.Annotations, subject.ArtifactType = nil, ""
	for _, b := range []struct {
		data []byte
		ann  map[string]string
	}{
		{p.Bundle, map[string]string{AnnotationBundleContent: contentMessageSignature}},
		{p.Provenance, map[string]string{AnnotationBundleContent: contentDSSE, AnnotationPredicateType: ProvenancePredicateType}},
	} {
		if b.data == nil {
			continue
		}
		bl := content.NewDescriptorFromBytes(BundleType, b.data)
		if err := pushBlob(ctx, repo, bl, b.data); err != nil {
			return fail(err)
		}
		rd, rb, err := encode(manifest(BundleType, bl, &subject, b.ann))
		if err != nil {
			return fail(err)
		}
		// oras-go indexes the referrer under the sha256-<digest> tag when
		// the registry does not answer with OCI-Subject (no referrers API).
		if err := repo.Push(ctx, rd, bytes.NewReader(rb)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
			return fail(err)
		}
	}
	return r.Registry + "/" + r.Repository + "@" + md.Digest.String(), nil
}

func pushBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, b []byte) error {
	ok, err := repo.Exists(ctx, d)
	if err != nil || ok {
		return err
	}
	if err := repo.Push(ctx, d, bytes.NewReader(b)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) {
		return err
	}
	return nil
}

func manifest(artifactType string, layer ocispec.Descriptor, subject *ocispec.Descriptor, ann map[string]string) ocispec.Manifest {
	m := ocispec.Manifest{
		MediaType: ocispec.MediaTypeImageManifest, ArtifactType: artifactType,
		Config: ocispec.DescriptorEmptyJSON, Layers: []ocispec.Descriptor{layer},
		Subject: subject, Annotations: ann,
	}
	m.SchemaVersion = 2
	m.Config.Data = nil // the empty config is pushed as a blob; the descriptor does not inline it
	return m
}

func encode(m ocispec.Manifest) (ocispec.Descriptor, []byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return ocispec.Descriptor{}, nil, err
	}
	d := content.NewDescriptorFromBytes(m.MediaType, b)
	d.ArtifactType, d.Annotations = m.ArtifactType, m.Annotations
	return d, b, nil
}

// Pull fetches the pack at ref (a tag, or a digest: NAME@sha256:… or
// NAME:TAG@sha256:…, checked against what the registry serves) and the
// bundle referrers of its manifest, through the referrers API when the
// registry has one and the sha256-<digest> tag otherwise.
func Pull(ctx context.Context, ref string, o Options) (*Pulled, error) {
	repo, r, err := open(ref, o)
	if err != nil {
		return nil, err
	}
	if r.Reference == "" {
		return nil, fmt.Errorf("pull %s: %w: name a tag (REPO:TAG) or a digest (REPO@sha256:…)", ref, ErrUsage)
	}
	pinned, err := r.Digest()
	if err != nil {
		pinned = "" // a tag
	}
	md, mb, err := fetchManifest(ctx, repo, r.Reference, o.Limits)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	if pinned != "" && md.Digest != pinned {
		return nil, fmt.Errorf("pull %s: %w: the registry served manifest %s", ref, ErrRefused, md.Digest)
	}
	m, err := parsePackManifest(mb)
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	p := &Pulled{Digest: md.Digest.String(), Name: m.Annotations[AnnotationPackName], Version: m.Annotations[AnnotationPackVersion]}
	p.Ref = r.Registry + "/" + r.Repository + "@" + p.Digest
	if p.Archive, err = fetchBlob(ctx, repo, m.Layers[0], o.Limits.ArchiveBytes, "pack layer"); err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: md.Digest, Size: md.Size}
	var refs []ocispec.Descriptor
	err = repo.Referrers(ctx, subject, BundleType, func(rs []ocispec.Descriptor) error {
		refs = append(refs, rs...)
		if len(refs) > 8*o.Limits.Referrers {
			return fmt.Errorf("%w: more than %d bundle referrers", ErrRefused, 8*o.Limits.Referrers)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pull %s: referrers: %w", ref, classify(err))
	}
	for _, rd := range refs {
		kind := rd.Annotations[AnnotationBundleContent]
		switch {
		case kind == contentMessageSignature && len(p.Bundles) < o.Limits.Referrers:
		case kind == contentDSSE && rd.Annotations[AnnotationPredicateType] == ProvenancePredicateType && len(p.Provenances) < o.Limits.Referrers:
		default:
			continue // another tool's bundle (or more than we consider)
		}
		b, err := fetchBundle(ctx, repo, rd, md.Digest, o.Limits)
		if err != nil {
			return nil, fmt.Errorf("pull %s: bundle %s: %w", ref, rd.Digest, err)
		}
		if kind == contentMessageSignature {
			p.Bundles = append(p.Bundles, b)
		} else {
			p.Provenances = append(p.Provenances, b)
		}
	}
	return p, nil
}

// fetchManifest fetches the manifest reference names (a tag or digest),
// at most limit bytes, checked against its digest.
func fetchManifest(ctx context.Context, repo *remote.Repository, reference string, l Limits) (ocispec.Descriptor, []byte, error) {
	d, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		return d, nil, classify(err)
	}
	defer rc.Close()
	if d.MediaType != ocispec.MediaTypeImageManifest {
		return d, nil, fmt.Errorf("%w: manifest media type %q, want %s", ErrRefused, d.MediaType, ocispec.MediaTypeImageManifest)
	}
	b, err := readAll(rc, d, l.ManifestBytes, "manifest")
	return d, b, err
}

// fetchBundle fetches a bundle referrer's manifest, checks it refers to
// subject, and returns its one layer.
func fetchBundle(ctx context.Context, repo *remote.Repository, rd ocispec.Descriptor, subject digest.Digest, l Limits) ([]byte, error) {
	d, mb, err := fetchManifest(ctx, repo, rd.Digest.String(), l)
	if err != nil {
		return nil, err
	}
	if d.Digest != rd.Digest {
		return nil, fmt.Errorf("%w: the registry served manifest %s", ErrRefused, d.Digest)
	}
	layer, err := parseBundleManifest(mb, subject)
	if err != nil {
		return nil, err
	}
	return fetchBlob(ctx, repo, layer, l.BundleBytes, "bundle layer")
}

// parsePackManifest decodes a pack's manifest (untrusted bytes) and checks
// it is one: our artifactType and exactly one pack layer.
func parsePackManifest(b []byte) (*ocispec.Manifest, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest is not JSON: %s", ErrRefused, cleanMsg(err))
	}
	if m.ArtifactType != ArtifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != PackMediaType {
		return nil, fmt.Errorf("%w: not a packrun pack (artifactType %q, want %q with one %s layer)", ErrRefused, clip(m.ArtifactType), ArtifactType, PackMediaType)
	}
	return &m, nil
}

// parseBundleManifest decodes a bundle referrer's manifest (untrusted
// bytes), checks it refers to subject with one bundle layer, and returns
// that layer.
func parseBundleManifest(b []byte, subject digest.Digest) (ocispec.Descriptor, error) {
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return ocispec.Descriptor{}, fmt.Errorf("%w: manifest is not JSON: %s", ErrRefused, cleanMsg(err))
	}
	if m.Subject == nil || m.Subject.Digest != subject || len(m.Layers) != 1 || m.Layers[0].MediaType != BundleType {
		return ocispec.Descriptor{}, fmt.Errorf("%w: not a Sigstore bundle referring to %s", ErrRefused, subject)
	}
	return m.Layers[0], nil
}

// clip shortens an untrusted string quoted in an error.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// fetchBlob fetches the blob d describes, refusing a declared size over
// limit before reading, and checks its size and digest.
func fetchBlob(ctx context.Context, repo *remote.Repository, d ocispec.Descriptor, limit int64, what string) ([]byte, error) {
	if d.Size < 0 || d.Size > limit {
		return nil, fmt.Errorf("%w: %s %s is %d bytes, over the limit of %d", ErrRefused, what, d.Digest, d.Size, limit)
	}
	if err := d.Digest.Validate(); err != nil || d.Digest.Algorithm() != digest.SHA256 {
		return nil, fmt.Errorf("%w: %s digest %q is not a sha256 digest", ErrRefused, what, d.Digest)
	}
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return nil, classify(err)
	}
	defer rc.Close()
	return readAll(rc, d, limit, what)
}

// readAll reads what d describes, at most limit bytes, and checks the
// bytes match d's size and digest.
func readAll(r io.Reader, d ocispec.Descriptor, limit int64, what string) ([]byte, error) {
	if d.Size > limit {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d", ErrRefused, what, d.Size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s: %s", ErrRefused, what, d.Digest, cleanMsg(err))
	}
	switch {
	case int64(len(b)) > limit:
		return nil, fmt.Errorf("%w: %s is over the limit of %d bytes", ErrRefused, what, limit)
	case int64(len(b)) != d.Size:
		return nil, fmt.Errorf("%w: %s %s is %d bytes, the registry announced %d (truncated or padded)", ErrRefused, what, d.Digest, len(b), d.Size)
	case digest.SHA256.FromBytes(b) != d.Digest:
		return nil, fmt.Errorf("%w: %s does not match its digest %s (tampered)", ErrRefused, what, d.Digest)
	}
	return b, nil
}

// classify wraps oras-go's not-found as ErrNotFound and keeps the rest,
// on one line.
func classify(err error) error {
	if errors.Is(err, ErrRefused) || errors.Is(err, ErrNotFound) {
		return err
	}
	msg := cleanMsg(err)
	if errors.Is(err, errdef.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	}
	if errors.Is(err, auth.ErrBasicCredentialNotFound) {
		return fmt.Errorf("%s (no credentials for this registry in the Docker config file: docker login or oras login)", msg)
	}
	// oras-go reports a Docker-Content-Digest header that does not match
	// the reference asked for without a sentinel.
	if errors.Is(err, errdef.ErrSizeExceedsLimit) || errors.Is(err, content.ErrMismatchedDigest) || errors.Is(err, content.ErrTrailingData) ||
		strings.Contains(msg, "digest mismatch") {
		return fmt.Errorf("%w: %s", ErrRefused, msg)
	}
	return errors.New(msg)
}

// cleanMsg is err's message on one line, at most 300 characters: registry
// error bodies may be long and multi-line.
func cleanMsg(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}
