package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
)

// The installed-pack index (table packs) and the pack blobs
// (Options.PackBlobDir), host.Packs.
//
// Installing writes every blob durably and then commits the row, so a row
// never names a missing blob. Uninstalling deletes rows and then sweeps the
// blobs no row names. The two are kept apart by the database's write lock,
// which serialises them across processes: the sweep runs inside a write
// transaction (it reads which blobs are named and deletes the others
// before the lock is released), and an install, inside its own, puts again
// any blob a sweep may have deleted since it first wrote them.

// packColumns are the index's columns, as scanPack reads them.
const packColumns = `name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signature_sha256, signer, key_id, provenance, installed_at`

// storedProvenance is the encoding of the provenance column, which packrun
// defined before the single store (json.Marshal of registry.Provenance, untagged): existing
// rows hold it.
type storedProvenance struct {
	BuilderID    string
	BuildType    string
	SourceDigest string
	BuiltAt      time.Time
	Signer       string
}

func (s *Store) packBlobDir() blobs.Dir {
	return blobs.Dir{Path: s.opts.PackBlobDir, TmpPrefix: tmpPrefix}
}

// InstallPack implements host.Packs.
func (s *Store) InstallPack(ctx context.Context, p *host.InstalledPack, b host.PackBlobs) (*host.InstalledPack, bool, error) {
	const op = "install pack"
	inst, err := s.packRecord(op, p, b)
	if err != nil {
		return nil, false, err
	}
	ref := inst.Ref()
	// Installed already (or a conflict): answer without writing blobs that
	// nothing would refer to. The transaction below decides for good.
	if cur, err := scanPack(s.queryRow(ctx, `SELECT `+packColumns+` FROM packs WHERE name = ? AND version = ?`, inst.Name, inst.Version)); err == nil {
		return samePack(op, cur, inst)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, host.Wrap(op, ref, err)
	}
	data := [][]byte{b.Archive, b.Bundle, b.Provenance, b.Signature}
	dir := s.packBlobDir()
	// Durably, outside the write lock: the writer is not held up by
	// syncing a large archive.
	for _, d := range data {
		if d != nil {
			if _, err := dir.Put(d); err != nil {
				return nil, false, host.Wrap(op, ref, err)
			}
		}
	}
	prov, err := encodeProvenance(inst.Provenance)
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	if s.beforeInstallTx != nil {
		s.beforeInstallTx()
	}
	var out *host.InstalledPack
	var already bool
	err = s.w.do(ctx, func(tx *wtx) error {
		out, already = nil, false
		cur, err := scanPack(tx.QueryRow(`SELECT `+packColumns+` FROM packs WHERE name = ? AND version = ?`, inst.Name, inst.Version))
		if err == nil {
			out, already, err = samePack(op, cur, inst)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// An uninstall's sweep (in any process) may have deleted a blob
		// since it was written above. Sweeps run under the write lock,
		// which this transaction holds until it commits: what is here now
		// stays. Put keeps a blob that is present as it is.
		for _, d := range data {
			if d != nil {
				if _, err := dir.Put(d); err != nil {
					return err
				}
			}
		}
		tx.touch(s.gens.packs)
		_, err = tx.Exec(`INSERT INTO packs (`+packColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			inst.Name, inst.Version, inst.SHA256, inst.Size, []byte(inst.Manifest),
			nullable(inst.BundleSHA256), nullable(inst.ProvenanceSHA256), nullable(inst.SignatureSHA256),
			inst.Signer, inst.KeyID, prov, inst.InstalledAt.Format(time.RFC3339Nano))
		if err != nil {
			return err
		}
		out = inst
		return nil
	})
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	return out, already, nil
}

// samePack answers an install of inst over cur, installed under the same
// name@version: the identical pack is installed already; another is a
// conflict.
func samePack(op string, cur, inst *host.InstalledPack) (*host.InstalledPack, bool, error) {
	if cur.SHA256 == inst.SHA256 {
		return cur, true, nil
	}
	return nil, false, &host.Error{Op: op, Subject: inst.Ref(),
		Err: fmt.Errorf("%w (installed %s, this one %s)", host.ErrPackConflict, shortDigest(cur.SHA256), shortDigest(inst.SHA256))}
}

// packRecord is the row InstallPack stores for p and b: a copy of p with
// the digests and size of b and the installation time filled in.
func (s *Store) packRecord(op string, p *host.InstalledPack, b host.PackBlobs) (*host.InstalledPack, error) {
	if p == nil {
		return nil, host.Invalid(op, "pack", "is missing")
	}
	inst := *p
	switch {
	case inst.Name == "":
		return nil, host.Invalid(op, "name", "is empty")
	case inst.Version == "":
		return nil, host.Invalid(op, "version", "is empty")
	case len(b.Archive) == 0:
		return nil, host.Invalid(op, "archive", "is empty")
	case len(inst.Manifest) == 0:
		return nil, host.Invalid(op, "manifest", "is empty")
	}
	for _, f := range []struct {
		name   string
		digest *string
		data   []byte
	}{
		{"sha256", &inst.SHA256, b.Archive},
		{"bundle_sha256", &inst.BundleSHA256, b.Bundle},
		{"provenance_sha256", &inst.ProvenanceSHA256, b.Provenance},
		{"signature_sha256", &inst.SignatureSHA256, b.Signature},
	} {
		if f.data == nil {
			if *f.digest != "" {
				return nil, host.Invalid(op, f.name, "names a blob that is not given")
			}
			continue
		}
		d := blobs.Digest(f.data)
		if *f.digest != "" && *f.digest != d {
			return nil, host.Invalid(op, f.name, "is %s, but the blob given is %s", shortDigest(*f.digest), shortDigest(d))
		}
		*f.digest = d
	}
	if inst.Size == 0 {
		inst.Size = int64(len(b.Archive))
	} else if inst.Size != int64(len(b.Archive)) {
		return nil, host.Invalid(op, "size", "is %d, but the archive is %d bytes", inst.Size, len(b.Archive))
	}
	if inst.InstalledAt.IsZero() {
		inst.InstalledAt = s.now().Truncate(time.Millisecond)
	}
	inst.InstalledAt = inst.InstalledAt.UTC()
	if inst.Provenance != nil {
		pv := *inst.Provenance
		inst.Provenance = &pv
	}
	return &inst, nil
}

func encodeProvenance(p *host.PackProvenance) (any, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(storedProvenance{BuilderID: p.BuilderID, BuildType: p.BuildType, SourceDigest: p.SourceDigest, BuiltAt: p.BuiltAt, Signer: p.Signer})
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func scanPack(row interface{ Scan(...any) error }) (*host.InstalledPack, error) {
	var p host.InstalledPack
	var bundle, prov, sig, provJSON sql.NullString
	var at string
	var manifest []byte
	if err := row.Scan(&p.Name, &p.Version, &p.SHA256, &p.Size, &manifest, &bundle, &prov, &sig, &p.Signer, &p.KeyID, &provJSON, &at); err != nil {
		return nil, err
	}
	p.Manifest = manifest
	p.BundleSHA256, p.ProvenanceSHA256, p.SignatureSHA256 = bundle.String, prov.String, sig.String
	if provJSON.Valid {
		var sp storedProvenance
		if err := json.Unmarshal([]byte(provJSON.String), &sp); err != nil {
			return nil, fmt.Errorf("index entry %s: provenance: %w", p.Ref(), err)
		}
		p.Provenance = &host.PackProvenance{BuilderID: sp.BuilderID, BuildType: sp.BuildType, SourceDigest: sp.SourceDigest, BuiltAt: sp.BuiltAt, Signer: sp.Signer}
	}
	p.InstalledAt, _ = time.Parse(time.RFC3339Nano, at)
	p.InstalledAt = p.InstalledAt.UTC()
	return &p, nil
}

// ListPacks implements host.Packs.
func (s *Store) ListPacks(ctx context.Context) ([]*host.InstalledPack, error) {
	const op = "list packs"
	rows, err := s.query(ctx, `SELECT `+packColumns+` FROM packs`)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	var out []*host.InstalledPack
	for rows.Next() {
		p, err := scanPack(rows)
		if err != nil {
			return nil, host.Wrap(op, "", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, host.Wrap(op, "", err)
	}
	slices.SortFunc(out, func(a, b *host.InstalledPack) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return compareVersions(b.Version, a.Version) // newest first
	})
	return out, nil
}

// compareVersions orders SemVer versions by precedence; when either is not
// a strict SemVer version, it falls back to string order.
func compareVersions(a, b string) int {
	va, ea := semver.StrictNewVersion(a)
	vb, eb := semver.StrictNewVersion(b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	if c := va.Compare(vb); c != 0 {
		return c
	}
	return strings.Compare(a, b) // equal precedence (build metadata): still a total order
}

// UninstallPacks implements host.Packs.
func (s *Store) UninstallPacks(ctx context.Context, refs []*host.InstalledPack) error {
	const op = "uninstall packs"
	seen := map[string]bool{}
	var todo []*host.InstalledPack
	for _, r := range refs {
		if r == nil {
			return host.Invalid(op, "refs", "holds a nil pack")
		}
		if k := r.Ref() + "\x00" + r.SHA256; !seen[k] {
			seen[k] = true
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	s.uninstalling.Lock()
	defer s.uninstalling.Unlock()
	err := s.w.do(ctx, func(tx *wtx) error {
		var missing []string
		for _, r := range todo {
			var n int
			if err := tx.QueryRow(`SELECT COUNT(*) FROM packs WHERE name = ? AND version = ? AND (? = '' OR archive_sha256 = ?)`,
				r.Name, r.Version, r.SHA256, r.SHA256).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				missing = append(missing, r.Ref())
			}
		}
		if len(missing) > 0 {
			return host.Errorf(op, strings.Join(missing, ", "), host.ErrPackNotInstalled, "")
		}
		tx.touch(s.gens.packs)
		for _, r := range todo {
			if _, err := tx.Exec(`DELETE FROM packs WHERE name = ? AND version = ? AND (? = '' OR archive_sha256 = ?)`,
				r.Name, r.Version, r.SHA256, r.SHA256); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return host.Wrap(op, "", err)
	}
	// The rows are gone for good: the sweep runs even if ctx ends now.
	if err := s.sweepPackBlobs(context.WithoutCancel(ctx)); err != nil {
		return host.Wrap(op, "", fmt.Errorf("uninstalled, but deleting the blobs no pack refers to failed: %w", err))
	}
	return nil
}

// sweepPackBlobs deletes the pack blobs no installed pack refers to. It
// runs in the writer, inside a write transaction: no install, in any
// process, commits between its reading the index and its deleting files
// (an install that wrote its blobs before puts them again inside its
// transaction). It deletes on the strength of what the transaction sees,
// which may include what operations batched before it wrote; an install
// adds references (the sweep keeps more), and an uninstall's deletion never
// shares its batch: the caller holds s.uninstalling, and its own deletion
// was committed before.
func (s *Store) sweepPackBlobs(ctx context.Context) error {
	dir := s.opts.PackBlobDir
	return s.w.do(ctx, func(tx *wtx) error {
		keep := map[string]bool{}
		rows, err := tx.Query(`SELECT archive_sha256, COALESCE(bundle_sha256, ''), COALESCE(provenance_sha256, ''), COALESCE(signature_sha256, '') FROM packs`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var a, b, c, d string
			if err := rows.Scan(&a, &b, &c, &d); err != nil {
				rows.Close()
				return err
			}
			keep[a], keep[b], keep[c], keep[d] = true, true, true, true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		var errs []error
		for _, e := range entries {
			// Only blobs: temporary files start with a dot, and nothing
			// else is ours to delete.
			if keep[e.Name()] || !isDigest(e.Name()) || !e.Type().IsRegular() {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}

// legacyTmpPrefix names the temporary files packrun wrote into this
// directory before the single store (the registry kept its own index then).
const legacyTmpPrefix = ".tmp-"

// sweepPackTemp removes temporary files of interrupted installs older than
// an hour (younger ones may belong to another process writing right now).
func (s *Store) sweepPackTemp() {
	for _, prefix := range []string{tmpPrefix, legacyTmpPrefix} {
		paths, _ := filepath.Glob(filepath.Join(s.opts.PackBlobDir, prefix+"*"))
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.Remove(p)
			}
		}
	}
}

// isDigest: 64 lowercase hex digits, the name of a blob.
func isDigest(d string) bool {
	return len(d) == 64 && strings.Trim(d, "0123456789abcdef") == ""
}

// PackBlob implements host.Packs.
func (s *Store) PackBlob(ctx context.Context, digest string) ([]byte, error) {
	const op = "read pack blob"
	if !isDigest(digest) {
		return nil, host.Invalid(op, "sha256", "must be 64 lowercase hex digits")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := s.packBlobDir().Get(digest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, host.Errorf(op, shortDigest(digest), host.ErrNotFound, "no such blob")
	}
	return b, host.Wrap(op, shortDigest(digest), err)
}

// PacksGeneration implements host.Packs.
func (s *Store) PacksGeneration() uint64 { return s.gens.packs.load() }

// CheckPackIntegrity checks that every blob the index names is present and
// matches its digest. The first failure is returned, naming the pack.
func (s *Store) CheckPackIntegrity(ctx context.Context) error {
	all, err := s.ListPacks(ctx)
	if err != nil {
		return err
	}
	dir := s.packBlobDir()
	for _, p := range all {
		for _, d := range []string{p.SHA256, p.BundleSHA256, p.ProvenanceSHA256, p.SignatureSHA256} {
			if d == "" {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if _, err := dir.Get(d); err != nil {
				return fmt.Errorf("pack integrity: %s: %w", p.Ref(), err)
			}
		}
	}
	return nil
}
