package packrun

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/Masterminds/semver/v3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/packs"
)

// packIndex is the installed packs, held in memory so that nothing on the
// invoke or claim path lists packs or decodes a manifest: a lookup is one
// atomic load of the store's packs generation and a map read. Any install
// or uninstall (in this process or another sharing the store) moves the
// generation, and the next lookup rebuilds the index from the store,
// decoding only manifests it has not seen before (a pack's manifest and
// archive are immutable under its digest).
type packIndex struct {
	store backend

	mu     sync.Mutex
	gen    uint64
	built  bool
	byName map[string][]*indexedPack // newest version first
	all    []*indexedPack            // by name, newest version first
	infos  []api.PackInfo
	bySHA  map[string]*indexedPack // kept across rebuilds: decoded once
}

// indexedPack is one installed pack with its manifest decoded and, once
// opened, its archive.
type indexedPack struct {
	rec      *host.InstalledPack
	manifest *packs.Manifest
	version  *semver.Version // nil for a version that is not strict SemVer

	openMu  sync.Mutex
	archive *packs.Archive
}

func newPackIndex(s backend) *packIndex {
	return &packIndex{store: s, bySHA: map[string]*indexedPack{}}
}

// current returns the index for the store's current packs generation,
// rebuilding it if the generation moved.
func (x *packIndex) current(ctx context.Context) (*packIndex, error) {
	g := x.store.PacksGeneration()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.built && g == x.gen {
		return x, nil
	}
	recs, err := x.store.ListPacks(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string][]*indexedPack{}
	all := make([]*indexedPack, 0, len(recs))
	infos := make([]api.PackInfo, 0, len(recs))
	bySHA := make(map[string]*indexedPack, len(recs))
	for _, r := range recs {
		p := x.bySHA[r.SHA256]
		if p == nil || p.rec.Name != r.Name || p.rec.Version != r.Version {
			// Validated at install; the index only reads it back.
			m, err := packs.DecodeStoredManifest(r.Manifest)
			if err != nil {
				return nil, fmt.Errorf("installed pack %s: %w", r.Ref(), err)
			}
			p = &indexedPack{rec: r, manifest: m}
			if v, err := semver.StrictNewVersion(r.Version); err == nil {
				p.version = v
			}
		}
		bySHA[r.SHA256] = p
		byName[r.Name] = append(byName[r.Name], p)
		all = append(all, p)
		infos = append(infos, p.info())
	}
	x.byName, x.all, x.infos, x.bySHA = byName, all, infos, bySHA
	x.gen, x.built = g, true
	return x, nil
}

func (p *indexedPack) info() api.PackInfo {
	r := p.rec
	info := api.PackInfo{Name: r.Name, Version: r.Version, SHA256: r.SHA256, Signer: r.Signer, InstalledAt: r.InstalledAt}
	for _, n := range p.manifest.Nodes {
		info.Nodes = append(info.Nodes, n.TypeID)
		info.TaskTypes = append(info.TaskTypes, n.TaskTypes...)
	}
	return info
}

// ParseRef splits NAME, NAME@VERSION or NAME@RANGE (e.g. ^1.2, ~1.2.3,
// ">=1.0.0 <2.0.0", 1.x).
func ParseRef(ref string) (name, constraint string) {
	name, constraint, _ = strings.Cut(ref, "@")
	return name, constraint
}

// match returns the installed packs ref names, newest first. An unknown
// name or no matching version wraps host.ErrPackNotInstalled; a malformed
// version or range wraps ErrUsage.
func (x *packIndex) match(ctx context.Context, ref string) ([]*indexedPack, error) {
	name, constraint := ParseRef(ref)
	if name == "" {
		return nil, usageErr("%q: no pack name", ref)
	}
	var c *semver.Constraints
	if constraint != "" {
		if _, err := semver.StrictNewVersion(constraint); err != nil {
			if c, err = semver.NewConstraint(constraint); err != nil {
				return nil, usageErr("%q: %q is neither a version nor a range (e.g. 1.2.0, ^1.2)", ref, constraint)
			}
		}
	}
	cur, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	cur.mu.Lock()
	versions := cur.byName[name]
	cur.mu.Unlock()
	var out []*indexedPack
	for _, p := range versions {
		switch {
		case constraint == "":
		case c == nil:
			if p.rec.Version != constraint {
				continue
			}
		default:
			if p.version == nil || !c.Check(p.version) {
				continue
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		if len(versions) > 0 {
			var have []string
			for _, p := range versions {
				have = append(have, p.rec.Version)
			}
			return nil, fmt.Errorf("%s: %w (installed: %s)", ref, host.ErrPackNotInstalled, strings.Join(have, ", "))
		}
		return nil, fmt.Errorf("%s: %w", ref, host.ErrPackNotInstalled)
	}
	return out, nil
}

// resolve returns the pack ref names: that version, or the newest
// matching a range, or the newest of all.
func (x *packIndex) resolve(ctx context.Context, ref string) (*indexedPack, error) {
	m, err := x.match(ctx, ref)
	if err != nil {
		return nil, err
	}
	return m[0], nil
}

// Open returns the archive of the installed pack ref names, read from its
// blob (and checked again, digests included, as untrusted input) the first
// time only. It is the dispatcher's pack source.
func (x *packIndex) Open(ctx context.Context, ref string) (*packs.Archive, error) {
	p, err := x.resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return p.open(ctx, x.store)
}

func (p *indexedPack) open(ctx context.Context, s backend) (*packs.Archive, error) {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	if p.archive != nil {
		return p.archive, nil
	}
	// A failure (a blob missing, a canceled read) is not kept: the next
	// open tries again.
	b, err := s.PackBlob(ctx, p.rec.SHA256)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.rec.Ref(), err)
	}
	a, err := packs.ReadInstalled(bytes.NewReader(b), packs.DefaultLimits(), p.rec.SHA256, p.manifest)
	if err == nil && !bytes.Equal(a.ManifestBytes, p.rec.Manifest) {
		err = fmt.Errorf("%w: its pack.json differs from the manifest recorded at install", packs.ErrInvalidPack)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.rec.Ref(), err)
	}
	p.archive = a
	return a, nil
}

// list returns every installed pack record, by name, newest first.
func (x *packIndex) list(ctx context.Context) ([]*indexedPack, error) {
	cur, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return slices.Clone(cur.all), nil
}

// packInfos is GET /v1/packs: computed once per generation.
func (x *packIndex) packInfos(ctx context.Context) ([]api.PackInfo, error) {
	cur, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.infos, nil
}
