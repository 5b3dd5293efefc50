package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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

func (s *Store) packBlobDir() blobs.Dir {
	return blobs.Dir{Path: s.opts.PackBlobDir, TmpPrefix: tmpPrefix}
}

// packTx is the writer's transaction as storecore's pack rules see it:
// blobs are files, and the installed set changes under the single writer.
type packTx struct{ coreTx }

func (packTx) LockPacks(context.Context) error { return nil }

// PutPackBlobs puts the blobs again: an uninstall's sweep (in any
// process) may have deleted one since InstallPack wrote them. Sweeps run
// under the write lock, which this transaction holds until it commits:
// what is here now stays. Put keeps a blob that is present as it is.
func (x packTx) PutPackBlobs(_ context.Context, data [][]byte) error {
	dir := x.s.packBlobDir()
	for _, d := range data {
		if d != nil {
			if _, err := dir.Put(d); err != nil {
				return err
			}
		}
	}
	return nil
}

// DropPackBlobs does nothing: UninstallPacks sweeps the files after the
// commit (sweepPackBlobs).
func (packTx) DropPackBlobs(context.Context) error { return nil }

func (x packTx) PacksChanged(context.Context) error {
	x.tx.touch(x.s.gens.packs)
	return nil
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
	if cur, err := storecore.FindPack(ctx, coreDB{s}, inst.Name, inst.Version); err == nil {
		return storecore.SamePack(op, cur, inst)
	} else if !errors.Is(err, storecore.ErrNoRows) {
		return nil, false, host.Wrap(op, ref, err)
	}
	// Durably, outside the write lock: the writer is not held up by
	// syncing a large archive.
	if err := (packTx{coreTx{s: s}}).PutPackBlobs(ctx, [][]byte{b.Archive, b.Bundle, b.Provenance, b.Signature}); err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	if s.beforeInstallTx != nil {
		s.beforeInstallTx()
	}
	var out *host.InstalledPack
	var already bool
	err = s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, already, err = storecore.InstallPack(ctx, packTx{coreTx{s, tx}}, op, inst, b)
		return err
	})
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	return out, already, nil
}

// ListPacks implements host.Packs.
func (s *Store) ListPacks(ctx context.Context) ([]*host.InstalledPack, error) {
	out, err := storecore.ListPacks(ctx, coreDB{s})
	return out, host.Wrap("list packs", "", err)
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
		return storecore.UninstallPacks(ctx, packTx{coreTx{s, tx}}, op, todo)
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
		keep, err := storecore.PackDigests(ctx, coreTx{s, tx})
		if err != nil {
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
