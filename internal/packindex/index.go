// Package packindex is the installed packs held in memory, below the Host
// and the dispatcher alike: the Host lists and resolves packs through it,
// the dispatcher opens the pack a task or an invocation runs (its
// dispatch.PackSource) without calling back into the Host.
package packindex

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// Index is the installed packs, held in memory so that nothing on the
// invoke or claim path lists packs or decodes a manifest: a lookup is one
// atomic load of the store's packs generation and a map read. Any install
// or uninstall (in this process or another sharing the store) moves the
// generation, and the next lookup rebuilds the index from the store,
// decoding only manifests it has not seen before (a pack's manifest and
// archive are immutable under its digest).
type Index struct {
	store host.Backend

	mu     sync.Mutex
	gen    uint64
	built  bool
	byName map[string][]*Pack // newest version first
	all    []*Pack            // by name, newest version first
	infos  []PackInfo
	bySHA  map[string]*Pack // kept across rebuilds: decoded once
}

// Pack is one installed pack with its manifest decoded and, once
// opened, its archive.
type Pack struct {
	Rec      *host.InstalledPack
	Manifest *packs.Manifest
	version  *semver.Version // nil for a version that is not strict SemVer

	openMu  sync.Mutex
	archive *packs.Archive
}

// New returns the index of the packs installed in s, built at its first
// lookup.
func New(s host.Backend) *Index {
	return &Index{store: s, bySHA: map[string]*Pack{}}
}

// current returns the index for the store's current packs generation,
// rebuilding it if the generation moved.
func (x *Index) current(ctx context.Context) (*Index, error) {
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
	byName := map[string][]*Pack{}
	all := make([]*Pack, 0, len(recs))
	infos := make([]PackInfo, 0, len(recs))
	bySHA := make(map[string]*Pack, len(recs))
	for _, r := range recs {
		p := x.bySHA[r.SHA256]
		if p == nil || p.Rec.Name != r.Name || p.Rec.Version != r.Version {
			// Validated at install; the index only reads it back.
			m, err := packs.DecodeStoredManifest(r.Manifest)
			if err != nil {
				return nil, fmt.Errorf("installed pack %s: %w", r.Ref(), err)
			}
			p = &Pack{Rec: r, Manifest: m}
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

// PackInfo is one installed pack as GET /v1/packs lists it.
type PackInfo struct {
	Name        string    `json:"name"`
	Version     string    `json:"version"`
	SHA256      string    `json:"sha256"`
	Signer      string    `json:"signer,omitempty"`
	InstalledAt time.Time `json:"installed_at"`
	// Nodes are the typeIds of the pack's nodes.
	Nodes []string `json:"nodes,omitempty"`
	// TaskTypes are the task types its manifest routes to its nodes.
	TaskTypes []string `json:"task_types,omitempty"`
}

// Ref is Name@Version.
func (p PackInfo) Ref() string { return p.Name + "@" + p.Version }

func (p *Pack) info() PackInfo {
	r := p.Rec
	info := PackInfo{Name: r.Name, Version: r.Version, SHA256: r.SHA256, Signer: r.Signer, InstalledAt: r.InstalledAt}
	for _, n := range p.Manifest.Nodes {
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

// Match returns the installed packs ref names, newest first. An unknown
// name or no matching version wraps host.ErrPackNotInstalled; a malformed
// version or range wraps ErrUsage.
func (x *Index) Match(ctx context.Context, ref string) ([]*Pack, error) {
	name, constraint := ParseRef(ref)
	if name == "" {
		return nil, host.Usage("%q: no pack name", ref)
	}
	var c *semver.Constraints
	if constraint != "" {
		if _, err := semver.StrictNewVersion(constraint); err != nil {
			if c, err = semver.NewConstraint(constraint); err != nil {
				return nil, host.Usage("%q: %q is neither a version nor a range (e.g. 1.2.0, ^1.2)", ref, constraint)
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
	var out []*Pack
	for _, p := range versions {
		switch {
		case constraint == "":
		case c == nil:
			if p.Rec.Version != constraint {
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
				have = append(have, p.Rec.Version)
			}
			return nil, fmt.Errorf("%s: %w (installed: %s)", ref, host.ErrPackNotInstalled, strings.Join(have, ", "))
		}
		return nil, fmt.Errorf("%s: %w", ref, host.ErrPackNotInstalled)
	}
	return out, nil
}

// Resolve returns the pack ref names: that version, or the newest
// matching a range, or the newest of all.
func (x *Index) Resolve(ctx context.Context, ref string) (*Pack, error) {
	m, err := x.Match(ctx, ref)
	if err != nil {
		return nil, err
	}
	return m[0], nil
}

// Open returns the archive of the installed pack ref names, read from its
// blob (and checked again, digests included, as untrusted input) the first
// time only. It is the dispatcher's pack source.
func (x *Index) Open(ctx context.Context, ref string) (*packs.Archive, error) {
	p, err := x.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return p.Open(ctx, x.store)
}

// Open returns the pack's archive, read from its blob in s (and checked
// again, digests included, as untrusted input) the first time only.
func (p *Pack) Open(ctx context.Context, s host.Backend) (*packs.Archive, error) {
	p.openMu.Lock()
	defer p.openMu.Unlock()
	if p.archive != nil {
		return p.archive, nil
	}
	// A failure (a blob missing, a canceled read) is not kept: the next
	// open tries again.
	b, err := s.PackBlob(ctx, p.Rec.SHA256)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Rec.Ref(), err)
	}
	a, err := packs.ReadInstalled(bytes.NewReader(b), packs.DefaultLimits(), p.Rec.SHA256, p.Manifest)
	if err == nil && !bytes.Equal(a.ManifestBytes, p.Rec.Manifest) {
		err = fmt.Errorf("%w: its pack.json differs from the manifest recorded at install", packs.ErrInvalidPack)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Rec.Ref(), err)
	}
	p.archive = a
	return a, nil
}

// List returns every installed pack record, by name, newest first.
func (x *Index) List(ctx context.Context) ([]*Pack, error) {
	cur, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return slices.Clone(cur.all), nil
}

// PackInfos is GET /v1/packs: computed once per generation.
func (x *Index) PackInfos(ctx context.Context) ([]PackInfo, error) {
	cur, err := x.current(ctx)
	if err != nil {
		return nil, err
	}
	cur.mu.Lock()
	defer cur.mu.Unlock()
	return cur.infos, nil
}
