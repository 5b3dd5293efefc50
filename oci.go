package packrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/oci"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

// ErrRegistryRefused: an OCI registry answered something that is not a
// packrun pack or does not match its digest or a size limit (tampered,
// truncated, garbage, too large). Nothing was stored.
var ErrRegistryRefused = oci.ErrRefused

// OCIOptions say how to reach an OCI registry. Credentials come from the
// Docker config file ($DOCKER_CONFIG/config.json, else
// ~/.docker/config.json, or DockerConfig).
type OCIOptions struct {
	// PlainHTTPUnsafe speaks plain HTTP to a registry that is not on a
	// loopback address; loopback registries are always spoken to over
	// plain HTTP, every other one over HTTPS unless this is set.
	PlainHTTPUnsafe bool
	// DockerConfig names the Docker config file to take credentials from.
	DockerConfig string
}

func (o OCIOptions) internal() oci.Options {
	return oci.Options{
		PlainHTTPUnsafe: o.PlainHTTPUnsafe, DockerConfig: o.DockerConfig,
		Limits: oci.DefaultLimits(maxPackFileBytes, registry.MaxBundleSize),
	}
}

// PushOCI pushes the installed pack ref names (NAME@VERSION) to the OCI
// reference target (REGISTRY/REPO[:TAG]; the default tag is the pack's
// version), byte-identical to what was installed, with its signature and
// provenance bundles as referrers. It returns the pushed manifest's
// pinned reference (REGISTRY/REPO@sha256:…).
func (h *Host) PushOCI(ctx context.Context, ref, target string, o OCIOptions) (string, error) {
	p, err := h.index.Resolve(ctx, ref)
	if err != nil {
		return "", err
	}
	r := p.Rec
	if r.BundleSHA256 == "" {
		return "", usageErr("push %s: the pack was installed without a Sigstore bundle; only signed packs are pushed", r.Ref())
	}
	var s registry.Signed
	for _, b := range []struct {
		dst    *[]byte
		digest string
	}{{&s.Archive, r.SHA256}, {&s.Bundle, r.BundleSHA256}, {&s.Provenance, r.ProvenanceSHA256}} {
		if b.digest == "" {
			continue
		}
		if *b.dst, err = h.store.PackBlob(ctx, b.digest); err != nil {
			return "", fmt.Errorf("push %s: %w", r.Ref(), err)
		}
	}
	return pushSigned(ctx, s, r.Name, r.Version, target, o)
}

// PushOCIFile pushes a pack file and the bundles beside it (ReadSigned) to
// target, as PushOCI does. The file is not verified (whoever pulls it
// verifies it), but it must be a readable pack with a Sigstore bundle.
func PushOCIFile(ctx context.Context, path string, f PackFiles, target string, o OCIOptions) (string, error) {
	s, err := ReadSigned(path, f)
	if err != nil {
		return "", err
	}
	if s.Bundle == nil {
		return "", usageErr("push %s: no Sigstore bundle (%s.sigstore.json); sign the pack first: packrun sign %s --key KEY", path, path, path)
	}
	arch, err := packs.Read(bytes.NewReader(s.Archive), packs.DefaultLimits())
	if err != nil {
		return "", fmt.Errorf("push %s: %w", path, err)
	}
	return pushSigned(ctx, s, arch.Manifest.Name, arch.Manifest.Version, target, o)
}

func pushSigned(ctx context.Context, s registry.Signed, name, version, target string, o OCIOptions) (string, error) {
	d, err := oci.Push(ctx, target, oci.Pack{Name: name, Version: version, Archive: s.Archive, Bundle: s.Bundle, Provenance: s.Provenance}, o.internal())
	if err != nil {
		return "", ociErr(err)
	}
	return d, nil
}

// PulledPack is a pack fetched from an OCI registry and verified.
type PulledPack struct {
	// Ref is the reference pinned by the manifest's digest.
	Ref     string
	Signed  registry.Signed
	Verdict *registry.Verdict
	Archive *packs.Archive
}

// PullOCI fetches the pack at ref (REGISTRY/REPO:TAG or
// REGISTRY/REPO[:TAG]@sha256:…, the digest checked) and its bundle
// referrers, and verifies it against policy as a pack file is verified
// (registry.VerifyRequest). When the registry holds several bundles of a
// kind (a pack signed again), the first pair the policy accepts is taken.
func PullOCI(ctx context.Context, ref string, policy *registry.Policy, o OCIOptions) (*PulledPack, error) {
	p, err := oci.Pull(ctx, ref, o.internal())
	if err != nil {
		return nil, ociErr(err)
	}
	if len(p.Bundles) == 0 {
		return nil, fmt.Errorf("pull %s: %w: no Sigstore bundle refers to the pack (%s)", ref, registry.ErrUntrusted, p.Digest)
	}
	provs := p.Provenances
	if len(provs) == 0 {
		provs = [][]byte{nil}
	}
	var first error
	for _, b := range p.Bundles {
		for _, pr := range provs {
			s := registry.Signed{Archive: p.Archive, Bundle: b, Provenance: pr}
			v, arch, err := registry.VerifyRequest(ctx, policy, s, registry.VerifyOptions{})
			if err == nil {
				return &PulledPack{Ref: p.Ref, Signed: s, Verdict: v, Archive: arch}, nil
			}
			if first == nil {
				first = fmt.Errorf("pull %s: %w", ref, err)
			}
		}
	}
	return nil, first
}

// InstallOCI pulls the pack at ref (PullOCI) and installs it with Install,
// the path a pack file takes, under the trust policy f.TrustFile (default
// the host's). Nothing is stored unless every check passes. It returns
// the installed pack, whether it was already installed, and the pinned
// reference it came from.
func (h *Host) InstallOCI(ctx context.Context, ref string, f PackFiles, o OCIOptions) (*host.InstalledPack, bool, string, error) {
	policy, err := h.Policy(f.TrustFile)
	if err != nil {
		return nil, false, "", err
	}
	p, err := PullOCI(ctx, ref, policy, o)
	if err != nil {
		return nil, false, "", err
	}
	ip, already, err := h.Install(ctx, p.Signed, InstallOptions{Policy: policy})
	return ip, already, p.Ref, err
}

// ociErr turns internal/oci's error kinds into the root package's.
func ociErr(err error) error {
	switch {
	case errors.Is(err, oci.ErrNotFound):
		return &kindError{kind: ErrNotFound, msg: err.Error(), cause: err}
	case errors.Is(err, oci.ErrUsage):
		return &kindError{kind: ErrUsage, msg: err.Error(), cause: err}
	}
	return err
}

// WriteFiles writes the pulled pack to path and its bundles beside it
// (path.sigstore.json, path.provenance.sigstore.json), where InstallFile
// and VerifyFile look for them; the bundles first, so a pack file never
// stands without them. It returns the paths written.
func (p *PulledPack) WriteFiles(path string) ([]string, error) {
	var written []string
	for _, f := range []struct {
		path string
		data []byte
	}{{path + ".sigstore.json", p.Signed.Bundle}, {path + ".provenance.sigstore.json", p.Signed.Provenance}, {path, p.Signed.Archive}} {
		if f.data == nil {
			// a stale bundle beside the path would be taken for this pack's
			if err := os.Remove(f.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return written, err
			}
			continue
		}
		if err := blobs.WriteFile(f.path, f.data, 0o644); err != nil {
			return written, err
		}
		written = append(written, f.path)
	}
	return written, nil
}
