package registry

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/packrun/packrun/internal/db"
	"github.com/packrun/packrun/packs"
)

// ErrNotInstalled is returned when no installed pack matches a reference.
var ErrNotInstalled = errors.New("not installed")

// ErrConflict is returned when a different pack is already installed under
// the same name@version.
var ErrConflict = errors.New("a different pack is installed under this name and version")

// migrations of the registry's tables in packrun.db; append only.
var migrations = []string{
	`CREATE TABLE packs (
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		archive_sha256 TEXT NOT NULL,
		size INTEGER NOT NULL,
		manifest BLOB NOT NULL,
		bundle_sha256 TEXT,
		provenance_sha256 TEXT,
		signer TEXT NOT NULL,
		key_id TEXT NOT NULL,
		provenance TEXT,
		installed_at TEXT NOT NULL,
		PRIMARY KEY (name, version)
	)`,
}

// Store is the local pack store: content-addressed blobs under
// $PACKRUN_HOME/blobs/sha256 and an index in packrun.db. It is superseded
// by internal/sqlite.Store's host.Packs (the same table and blob
// directory) and will be removed once the CLI uses that. Installing writes
// and syncs every blob first and then records the pack in one transaction,
// so a crash at any point leaves either the old state or the new one (plus,
// at worst, unreferenced blobs that the next uninstall sweeps).
type Store struct {
	home string
	db   *sql.DB
}

// Installed describes one installed pack.
type Installed struct {
	Name             string          `json:"name"`
	Version          string          `json:"version"`
	SHA256           string          `json:"sha256"`
	Size             int64           `json:"size"`
	Signer           string          `json:"signer"`
	KeyID            string          `json:"keyId,omitempty"`
	Provenance       *Provenance     `json:"provenance,omitempty"`
	InstalledAt      time.Time       `json:"installedAt"`
	BundleSHA256     string          `json:"bundleSha256,omitempty"`
	ProvenanceSHA256 string          `json:"provenanceSha256,omitempty"`
	Manifest         json.RawMessage `json:"manifest"`
}

// Ref is Name@Version.
func (p *Installed) Ref() string { return p.Name + "@" + p.Version }

// OpenStore opens (creating if needed) the store under home.
func OpenStore(ctx context.Context, home string) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(home, "blobs", "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	d, err := db.Open(ctx, filepath.Join(home, "packrun.db"))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := db.Migrate(ctx, d, "registry", migrations); err != nil {
		d.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{home: home, db: d}
	s.sweepTemp()
	return s, nil
}

// Close closes the index.
func (s *Store) Close() error { return s.db.Close() }

// InstallOptions adjust Install.
type InstallOptions struct {
	VerifyOptions
	// Check, if set, runs after verification and before anything is
	// stored; an error refuses the install (e.g. the CLI loads every module).
	Check func(context.Context, *packs.Archive) error
}

// Install verifies a pack against policy and, only if it is trusted and
// well-formed, stores it. It reports whether the identical pack was already
// installed (then nothing changes).
func (s *Store) Install(ctx context.Context, p *Policy, req Signed, opts InstallOptions) (*Installed, bool, error) {
	verdict, arch, err := VerifyRequest(ctx, p, req, opts.VerifyOptions)
	if err != nil {
		return nil, false, err
	}
	m := arch.Manifest
	if opts.Check != nil {
		if err := opts.Check(ctx, arch); err != nil {
			return nil, false, err
		}
	}
	// The write transaction is taken before any blob is written: it
	// serialises installs with the blob sweep of uninstall, which runs under
	// the same lock. Blobs are written and synced, then the row is committed:
	// a crash before the commit leaves only unreferenced blobs.
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	defer tx.Rollback()
	if cur, err := scanPack(tx.QueryRowContext(ctx, `SELECT `+packColumns+` FROM packs WHERE name = ? AND version = ?`, m.Name, m.Version)); err == nil {
		if cur.SHA256 == arch.SHA256 {
			return cur, true, nil
		}
		return nil, false, fmt.Errorf("install %s@%s: %w (installed %s, this one %s)", m.Name, m.Version, ErrConflict, short(cur.SHA256), short(arch.SHA256))
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	for _, b := range [][]byte{req.Archive, req.Bundle, req.Provenance, req.Signature} {
		if b == nil {
			continue
		}
		if _, err := s.putBlob(b); err != nil {
			return nil, false, fmt.Errorf("install %s@%s: %w", m.Name, m.Version, err)
		}
	}
	inst := &Installed{
		Name: m.Name, Version: m.Version, SHA256: arch.SHA256, Size: arch.Size,
		Signer: verdict.Signer, KeyID: verdict.KeyID, Provenance: verdict.Provenance,
		InstalledAt: time.Now().UTC().Truncate(time.Millisecond), Manifest: arch.ManifestBytes,
		BundleSHA256: digestOrEmpty(req.Bundle), ProvenanceSHA256: digestOrEmpty(req.Provenance),
	}
	var prov []byte
	if inst.Provenance != nil {
		prov, _ = json.Marshal(inst.Provenance)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO packs (name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signer, key_id, provenance, installed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		inst.Name, inst.Version, inst.SHA256, inst.Size, []byte(inst.Manifest), nullable(inst.BundleSHA256), nullable(inst.ProvenanceSHA256),
		inst.Signer, inst.KeyID, nullable(string(prov)), inst.InstalledAt.Format(time.RFC3339Nano))
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return nil, false, fmt.Errorf("install %s@%s: %w", m.Name, m.Version, err)
	}
	return inst, false, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

const packColumns = `name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signer, key_id, provenance, installed_at`

func scanPack(row interface{ Scan(...any) error }) (*Installed, error) {
	var p Installed
	var bundle, prov, provJSON sql.NullString
	var at string
	var manifest []byte
	if err := row.Scan(&p.Name, &p.Version, &p.SHA256, &p.Size, &manifest, &bundle, &prov, &p.Signer, &p.KeyID, &provJSON, &at); err != nil {
		return nil, err
	}
	p.Manifest = manifest
	p.BundleSHA256, p.ProvenanceSHA256 = bundle.String, prov.String
	if provJSON.Valid {
		p.Provenance = new(Provenance)
		if err := json.Unmarshal([]byte(provJSON.String), p.Provenance); err != nil {
			return nil, fmt.Errorf("index entry %s@%s: %w", p.Name, p.Version, err)
		}
	}
	p.InstalledAt, _ = time.Parse(time.RFC3339Nano, at)
	return &p, nil
}

func (s *Store) get(ctx context.Context, name, version string) (*Installed, error) {
	p, err := scanPack(s.db.QueryRowContext(ctx, `SELECT `+packColumns+` FROM packs WHERE name = ? AND version = ?`, name, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s@%s: %w", name, version, ErrNotInstalled)
	}
	return p, err
}

// List returns every installed pack, by name then newest version first.
func (s *Store) List(ctx context.Context) ([]*Installed, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+packColumns+` FROM packs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Installed
	for rows.Next() {
		p, err := scanPack(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return compareVersions(out[i].Version, out[j].Version) > 0
	})
	return out, nil
}

func compareVersions(a, b string) int {
	va, ea := semver.StrictNewVersion(a)
	vb, eb := semver.StrictNewVersion(b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	return va.Compare(vb)
}

// ParseRef splits NAME, NAME@VERSION or NAME@RANGE (e.g. ^1.2, ~1.2.3,
// ">=1.0.0 <2.0.0", 1.x).
func ParseRef(ref string) (name, constraint string) {
	name, constraint, _ = strings.Cut(ref, "@")
	return name, constraint
}

// Resolve finds the installed pack a reference names: an exact version, or
// the newest version matching a range (the newest of all without one).
func (s *Store) Resolve(ctx context.Context, ref string) (*Installed, error) {
	matches, err := s.Match(ctx, ref)
	if err != nil {
		return nil, err
	}
	return matches[0], nil
}

// Match returns every installed pack a reference names, newest first.
func (s *Store) Match(ctx context.Context, ref string) ([]*Installed, error) {
	name, constraint := ParseRef(ref)
	if name == "" {
		return nil, fmt.Errorf("%q: no pack name", ref)
	}
	all, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	var c *semver.Constraints
	if constraint != "" {
		if _, err := semver.StrictNewVersion(constraint); err != nil {
			if c, err = semver.NewConstraint(constraint); err != nil {
				return nil, fmt.Errorf("%q: %q is neither a version nor a range: %v", ref, constraint, err)
			}
		}
	}
	var out []*Installed
	for _, p := range all {
		if p.Name != name {
			continue
		}
		switch {
		case constraint == "":
		case c == nil:
			if p.Version != constraint {
				continue
			}
		default:
			v, err := semver.StrictNewVersion(p.Version)
			if err != nil || !c.Check(v) {
				continue
			}
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", ref, ErrNotInstalled)
	}
	return out, nil
}

// Open reads an installed pack's archive back from the blob store, checking
// it again (digests included) as untrusted input.
func (s *Store) Open(ctx context.Context, p *Installed) (*packs.Archive, error) {
	b, err := s.readBlob(p.SHA256)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Ref(), err)
	}
	a, err := packs.Read(bytes.NewReader(b), packs.DefaultLimits())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p.Ref(), err)
	}
	return a, nil
}

// Uninstall removes the packs a reference names (every version without
// one) and deletes the blobs nothing else refers to.
func (s *Store) Uninstall(ctx context.Context, ref string) ([]*Installed, error) {
	matches, err := s.Match(ctx, ref)
	if err != nil {
		return nil, err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range matches {
		if _, err := tx.ExecContext(ctx, `DELETE FROM packs WHERE name = ? AND version = ?`, p.Name, p.Version); err != nil {
			tx.Rollback()
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, err
	}
	return matches, s.sweepBlobs(ctx)
}

// Export writes an installed pack and its bundles into dir, byte-identical
// to what was installed: NAME-VERSION.pack, .pack.sigstore.json and
// .pack.provenance.sigstore.json. It returns the paths written.
func (s *Store) Export(ctx context.Context, ref, dir string) ([]string, error) {
	p, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	base := filepath.Join(dir, p.Name+"-"+p.Version+".pack")
	files := []struct{ path, digest string }{{base, p.SHA256}, {base + ".sigstore.json", p.BundleSHA256}, {base + ".provenance.sigstore.json", p.ProvenanceSHA256}}
	var written []string
	for _, f := range files {
		if f.digest == "" {
			continue
		}
		b, err := s.readBlob(f.digest)
		if err != nil {
			return written, fmt.Errorf("export %s: %w", p.Ref(), err)
		}
		if err := writeAtomic(f.path, b, 0o644); err != nil {
			return written, fmt.Errorf("export %s: %w", p.Ref(), err)
		}
		written = append(written, f.path)
	}
	return written, nil
}

// CheckIntegrity verifies that every indexed pack's blobs are present and
// match their digests.
func (s *Store) CheckIntegrity(ctx context.Context) error {
	all, err := s.List(ctx)
	if err != nil {
		return err
	}
	for _, p := range all {
		for _, d := range []string{p.SHA256, p.BundleSHA256, p.ProvenanceSHA256} {
			if d == "" {
				continue
			}
			if _, err := s.readBlob(d); err != nil {
				return fmt.Errorf("%s: %w", p.Ref(), err)
			}
		}
	}
	return nil
}
