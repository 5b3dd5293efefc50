package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/store/storecore"
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

func (s *Store) packBlobDir() blobs.Dir {
	return blobs.Dir{Path: s.opts.PackBlobDir, TmpPrefix: tmpPrefix}
}

// InstallPack implements host.Packs.
func (s *Store) InstallPack(ctx context.Context, p *host.InstalledPack, b host.PackBlobs) (*host.InstalledPack, bool, error) {
	const op = "install pack"
	inst, err := storecore.PackRecord(op, p, b, s.now())
	if err != nil {
		return nil, false, err
	}
	ref := inst.Ref()
	// Installed already (or a conflict): answer without writing blobs that
	// nothing would refer to. The transaction below decides for good.
	if cur, err := scanPack(s.queryRow(ctx, `SELECT `+packColumns+` FROM packs WHERE name = ? AND version = ?`, inst.Name, inst.Version)); err == nil {
		return storecore.SamePack(op, cur, inst)
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
	prov, err := storecore.EncodeProvenance(inst.Provenance)
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
			out, already, err = storecore.SamePack(op, cur, inst)
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

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
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
	var stored *string
	if provJSON.Valid {
		stored = &provJSON.String
	}
	var err error
	if p.Provenance, err = storecore.DecodeProvenance(p.Ref(), stored); err != nil {
		return nil, err
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
	storecore.SortPacks(out)
	return out, nil
}

// UninstallPacks implements host.Packs.
func (s *Store) UninstallPacks(ctx context.Context, refs []*host.InstalledPack) error {
	const op = "uninstall packs"
	todo, err := storecore.UninstallRefs(op, refs)
	if err != nil || len(todo) == 0 {
		return err
	}
	s.uninstalling.Lock()
	defer s.uninstalling.Unlock()
	err = s.w.do(ctx, func(tx *wtx) error {
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
			if keep[e.Name()] || !storecore.IsDigest(e.Name()) || !e.Type().IsRegular() {
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

// PackBlob implements host.Packs.
func (s *Store) PackBlob(ctx context.Context, digest string) ([]byte, error) {
	const op = "read pack blob"
	if !storecore.IsDigest(digest) {
		return nil, host.Invalid(op, "sha256", "must be 64 lowercase hex digits")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b, err := s.packBlobDir().Get(digest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, host.Errorf(op, storecore.ShortDigest(digest), host.ErrNotFound, "no such blob")
	}
	return b, host.Wrap(op, storecore.ShortDigest(digest), err)
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
