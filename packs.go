package packrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

// PackFiles says where a pack file's signatures are and how to judge them
// (packs.Files: InvokeRequest.Trust carries one).
type PackFiles = packs.Files

// MaxPackFileBytes bounds a pack file read from disk: the archive limit.
var maxPackFileBytes = packs.DefaultLimits().ArchiveBytes

// ReadSigned reads a pack file and the signatures beside it (or where f
// says): FILE.sig, or for FILE.tgz also FILE.sig without .tgz (an openwop
// registry's <version>.sig). A missing pack file wraps ErrNotFound; a missing default
// signature file is simply absent, a missing explicit one is an error.
func ReadSigned(path string, f PackFiles) (registry.Signed, error) {
	var s registry.Signed
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return s, notFound("%s: no such file", path)
	case err != nil:
		return s, err
	case fi.IsDir():
		return s, usageErr("%s is a directory; build a pack from it with 'packrun pack %s'", path, path)
	}
	if s.Archive, err = ReadFile(path, maxPackFileBytes); err != nil {
		return s, err
	}
	optional := func(explicit, dflt string) ([]byte, error) {
		p := explicit
		if p == "" {
			p = dflt
		}
		b, err := ReadFile(p, 16<<20)
		if errors.Is(err, fs.ErrNotExist) && explicit == "" {
			return nil, nil
		}
		return b, err
	}
	s.Integrity = f.Integrity
	if s.Signature, err = optional(f.Signature, path+".sig"); err != nil {
		return s, err
	}
	if base, ok := strings.CutSuffix(path, ".tgz"); ok && s.Signature == nil && f.Signature == "" {
		// an openwop registry's layout: <version>.tgz beside <version>.sig
		if s.Signature, err = optional("", base+".sig"); err != nil {
			return s, err
		}
	}
	if s.Signature == nil {
		if s.Bundle, err = optional(f.Bundle, path+".sigstore.json"); err != nil {
			return s, err
		}
		if s.Provenance, err = optional(f.Provenance, path+".provenance.sigstore.json"); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Policy loads the trust policy (file "" is the host's).
func (h *Host) Policy(file string) (*registry.Policy, error) {
	if file == "" {
		file = h.cfg.TrustFile
	}
	return registry.LoadPolicy(file)
}

// VerifyFile verifies a pack file against the trust policy without
// installing it, and returns the verdict and the opened archive.
func (h *Host) VerifyFile(ctx context.Context, path string, f PackFiles) (*registry.Verdict, *packs.Archive, error) {
	if f.TrustFile == "" {
		f.TrustFile = h.cfg.TrustFile
	}
	return VerifyFile(ctx, path, f)
}

// VerifyFile verifies a pack file and its signatures (ReadSigned) against
// the trust policy in f.TrustFile, which it needs, without a Host.
func VerifyFile(ctx context.Context, path string, f PackFiles) (*registry.Verdict, *packs.Archive, error) {
	if f.TrustFile == "" {
		return nil, nil, usageErr("verify %s: no trust policy file given", path)
	}
	s, err := ReadSigned(path, f)
	if err != nil {
		return nil, nil, err
	}
	policy, err := registry.LoadPolicy(f.TrustFile)
	if err != nil {
		return nil, nil, err
	}
	v, arch, err := registry.VerifyRequest(ctx, policy, s, registry.VerifyOptions{AllowUnsignedUnsafe: f.AllowUnsignedUnsafe})
	return v, arch, signAgainHint(err, path)
}

// signAgainHint adds what to run to the refusal of a pack file rebuilt
// after it was signed.
func signAgainHint(err error, path string) error {
	if errors.Is(err, registry.ErrChangedSinceSigned) {
		return fmt.Errorf("%w: run `packrun sign %s --key PREFIX.key` again (or, for a local.* project, `packrun dev`)", err, path)
	}
	return err
}

// InstallOptions adjust Install.
type InstallOptions struct {
	// Policy judges the signatures (nil: the host's trust policy).
	Policy *registry.Policy
	// AllowUnsignedUnsafe accepts a pack that has no signature at all.
	AllowUnsignedUnsafe bool
	// ReplaceLocal lets a different pack replace the one installed under
	// the same name@version, for packs under local.* only (packrun dev
	// reinstalling each build). Otherwise that is a conflict.
	ReplaceLocal bool
}

// Install verifies a signed pack against the trust policy and, only if it
// is trusted and well-formed and every module loads and serves the nodes
// its manifest declares, stores it and routes its task types. Installing
// the identical pack again changes nothing (already is true); a different
// pack under the same name@version wraps host.ErrPackConflict.
func (h *Host) Install(ctx context.Context, s registry.Signed, opts InstallOptions) (p *host.InstalledPack, already bool, err error) {
	policy := opts.Policy
	if policy == nil {
		if policy, err = h.Policy(""); err != nil {
			return nil, false, err
		}
	}
	verdict, arch, err := registry.VerifyRequest(ctx, policy, s, registry.VerifyOptions{AllowUnsignedUnsafe: opts.AllowUnsignedUnsafe})
	if err != nil {
		return nil, false, err
	}
	if err := h.checkModules(ctx, arch); err != nil {
		return nil, false, err
	}
	rec := &host.InstalledPack{
		Name: arch.Manifest.Name, Version: arch.Manifest.Version, SHA256: arch.SHA256, Size: arch.Size,
		Signer: verdict.Signer, KeyID: verdict.KeyID, Manifest: arch.ManifestBytes,
		InstalledAt: time.Now().UTC().Truncate(time.Millisecond),
	}
	if pr := verdict.Provenance; pr != nil {
		rec.Provenance = &host.PackProvenance{BuilderID: pr.BuilderID, BuildType: pr.BuildType, SourceDigest: pr.SourceDigest, BuiltAt: pr.BuiltAt, Signer: pr.Signer}
	}
	pb := host.PackBlobs{Archive: s.Archive, Bundle: s.Bundle, Provenance: s.Provenance, Signature: s.Signature}
	p, already, err = h.store.InstallPack(ctx, rec, pb)
	if errors.Is(err, host.ErrPackConflict) && opts.ReplaceLocal && registry.MatchNamespace(registry.DevNamespace, rec.Name) {
		// Uninstall exactly the build installed (its digest), then install
		// this one; the routes are set again below.
		var cur *host.InstalledPack
		if cur, _, err = h.Pack(ctx, rec.Ref()); err == nil {
			if err = h.store.UninstallPacks(ctx, []*host.InstalledPack{cur}); err == nil {
				p, already, err = h.store.InstallPack(ctx, rec, pb)
			}
		}
	}
	if errors.Is(err, host.ErrPackConflict) {
		return nil, false, fmt.Errorf("%w: bump the version in pack.json, or develop a local.* pack with `packrun dev` (it replaces its own builds)", err)
	}
	if err != nil {
		return nil, false, err
	}
	if err := h.routeTaskTypes(ctx, p.Name); err != nil {
		return p, already, err
	}
	return p, already, nil
}

// InstallFile is Install of a pack file and its signatures (ReadSigned).
func (h *Host) InstallFile(ctx context.Context, path string, f PackFiles) (*host.InstalledPack, bool, error) {
	s, err := ReadSigned(path, f)
	if err != nil {
		return nil, false, err
	}
	var policy *registry.Policy
	if f.TrustFile != "" {
		if policy, err = h.Policy(f.TrustFile); err != nil {
			return nil, false, err
		}
	}
	p, already, err := h.Install(ctx, s, InstallOptions{Policy: policy, AllowUnsignedUnsafe: f.AllowUnsignedUnsafe})
	return p, already, signAgainHint(err, path)
}

// checkModules loads every module of a pack (warming the compilation
// cache) and checks it serves the manifest's nodes under the manifest's
// name, with the ABI check and load options every later load uses.
func (h *Host) checkModules(ctx context.Context, arch *packs.Archive) error {
	m := arch.Manifest
	if err := dispatch.CheckABI(m); err != nil {
		return err
	}
	rt, err := h.Runtime(ctx)
	if err != nil {
		return err
	}
	for _, mod := range m.Runtime.Modules {
		wasm, _ := arch.File(mod.Path)
		lm, err := rt.Load(ctx, wasm, dispatch.LoadOptions(m, mod, noOverride))
		if err != nil {
			return err
		}
		info := lm.Info()
		lm.Close(ctx)
		if info.PackName != m.Name {
			return fmt.Errorf("%w: %s: module %s says its pack is %q", ErrRefusedPack, m.Name, mod.Path, info.PackName)
		}
		for _, n := range m.Nodes {
			if nm, _ := m.NodeModule(n.TypeID); nm.Path != mod.Path {
				continue
			}
			if !slices.Contains(info.Nodes, n.TypeID) {
				return fmt.Errorf("%w: %s: manifest node %q is not exported by %s (it has %s)", ErrRefusedPack, m.Name, n.TypeID, mod.Path, strings.Join(info.Nodes, ", "))
			}
		}
	}
	return nil
}

// ErrRefusedPack is wrapped when a pack's modules do not match its
// manifest.
var ErrRefusedPack = fmt.Errorf("%w: modules do not match the manifest", packs.ErrInvalidPack)

// routeTaskTypes routes the task types of names' newest installed
// versions (a name with none left loses its routes), each sensor node's
// (host.SensorTaskType) and each subscribing node's
// (host.SubscriberTaskType, with the pack's subscriptions replaced to
// match), then keeps the sensors' schedules in sync
// (syncSensorSchedules). Operator overrides still win.
func (h *Host) routeTaskTypes(ctx context.Context, names ...string) error {
	for _, name := range names {
		var routes []host.TaskTypeRoute
		subs := []host.Subscription{}
		if ps, err := h.index.Match(ctx, name); err == nil {
			for _, n := range ps[0].Manifest.Nodes {
				for _, tt := range n.TaskTypes {
					routes = append(routes, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: name, Node: n.TypeID})
				}
			}
			routes = append(routes, sensorRoutes(name, ps[0].Manifest)...)
			var subRoutes []host.TaskTypeRoute
			subRoutes, subs = subscriptionsOf(name, ps[0].Manifest)
			routes = append(routes, subRoutes...)
		} else if !errors.Is(err, host.ErrPackNotInstalled) {
			return err
		}
		if err := h.store.SetPackTaskTypes(ctx, name, routes); err != nil {
			return fmt.Errorf("route task types of %s: %w", name, err)
		}
		if err := h.store.SetPackSubscriptions(ctx, name, subs); err != nil {
			return fmt.Errorf("subscriptions of %s: %w", name, err)
		}
	}
	return h.syncSensorSchedules(ctx)
}

// routeAllTaskTypes routes every installed pack's task types (serve does
// it at start, for stores written by older versions).
func (h *Host) routeAllTaskTypes(ctx context.Context) error {
	all, err := h.index.List(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, p := range all {
		if len(names) == 0 || names[len(names)-1] != p.Rec.Name {
			names = append(names, p.Rec.Name)
		}
	}
	return h.routeTaskTypes(ctx, names...)
}

// Packs lists the installed packs, by name, newest version first.
func (h *Host) Packs(ctx context.Context) ([]*host.InstalledPack, error) {
	all, err := h.index.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*host.InstalledPack, len(all))
	for i, p := range all {
		out[i] = p.Rec
	}
	return out, nil
}

// Pack returns the installed pack ref names (NAME, NAME@VERSION,
// NAME@RANGE: the newest match) with its decoded manifest.
func (h *Host) Pack(ctx context.Context, ref string) (*host.InstalledPack, *packs.Manifest, error) {
	p, err := h.index.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	return p.Rec, p.Manifest, nil
}

// OpenPack returns the archive of the installed pack ref names.
func (h *Host) OpenPack(ctx context.Context, ref string) (*packs.Archive, error) {
	return h.index.Open(ctx, ref)
}

// Uninstall removes the packs ref names (every version of a bare NAME),
// their task-type routes when no version is left, and the blobs nothing
// refers to any more.
func (h *Host) Uninstall(ctx context.Context, ref string) ([]*host.InstalledPack, error) {
	ps, err := h.index.Match(ctx, ref)
	if err != nil {
		return nil, err
	}
	recs := make([]*host.InstalledPack, len(ps))
	for i, p := range ps {
		recs[i] = p.Rec
	}
	if err := h.store.UninstallPacks(ctx, recs); err != nil {
		return nil, err
	}
	name, _ := ParseRef(ref)
	return recs, h.routeTaskTypes(ctx, name)
}

// Export writes the installed pack ref names and its signatures into dir,
// byte-identical to what was installed: NAME-VERSION.pack, and beside it
// those it was installed with of .pack.sigstore.json,
// .pack.provenance.sigstore.json and .pack.sig (the detached Ed25519
// signature of an openwop registry pack), where InstallFile looks for
// them, so the export installs in another home. It returns the paths
// written.
func (h *Host) Export(ctx context.Context, ref, dir string) ([]string, error) {
	p, err := h.index.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	r := p.Rec
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, r.Name+"-"+r.Version+".pack")
	files := []struct{ path, digest string }{{base, r.SHA256}, {base + ".sigstore.json", r.BundleSHA256},
		{base + ".provenance.sigstore.json", r.ProvenanceSHA256}, {base + ".sig", r.SignatureSHA256}}
	var written []string
	for _, f := range files {
		if f.digest == "" {
			continue
		}
		b, err := h.store.PackBlob(ctx, f.digest)
		if err != nil {
			return written, fmt.Errorf("export %s: %w", r.Ref(), err)
		}
		if err := blobs.WriteFile(f.path, b, 0o644); err != nil {
			return written, fmt.Errorf("export %s: %w", r.Ref(), err)
		}
		written = append(written, f.path)
	}
	return written, nil
}

var noOverride runtime.Limits
