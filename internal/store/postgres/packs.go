package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ host.Packs = (*Store)(nil)

// The installed-pack index (table packs) and the pack blobs (pack_blobs,
// in the database: every node reads them, and a node needs nothing but
// the database), host.Packs, as internal/store/sqlite's.
//
// The packs generation is store_generations' row 'packs'. Every change of
// the installed set (an install, an uninstall) locks that row first and
// moves it in the same transaction, so installs and uninstalls of all
// nodes are serial, and a node that reads the generation after the commit
// reads the new value: PacksGeneration reads the row itself, there is no
// copy to be stale. An install stores its blobs and its row in one
// transaction, and an uninstall deletes its rows and the blobs no
// remaining row names in one: a row never names a missing blob, and no
// blob outlives every row naming it, whatever crashes.

// packColumns are the index's columns, as scanPack reads them.
const packColumns = `name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signature_sha256, signer, key_id, provenance, installed_at`

// packsGen is the generation row of the installed packs.
const packsGen = "packs"

// lockPacks locks the packs generation row: the installed set changes
// under it, one change at a time across nodes.
func (x *tx) lockPacks() error {
	_, err := x.Exec(x.ctx, `SELECT value FROM store_generations WHERE name = $1 FOR UPDATE`, packsGen)
	return err
}

// bumpPacks moves the packs generation (its row locked by lockPacks).
func (x *tx) bumpPacks() error {
	_, err := x.Exec(x.ctx, `UPDATE store_generations SET value = value + 1 WHERE name = $1`, packsGen)
	return err
}

// PacksGeneration implements host.Packs: the generation row as committed
// now, read on every call (one indexed read), so that an install
// committed on any node is seen by the next call on every node. If the
// database cannot be read it returns 0, which no committed generation is
// (they start at 1): a reader then rebuilds, and its ListPacks reports
// the failure.
func (s *Store) PacksGeneration() uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var g int64
	if err := s.pool.QueryRow(ctx, `SELECT value FROM store_generations WHERE name = $1`, packsGen).Scan(&g); err != nil {
		return 0
	}
	return uint64(g)
}

// InstallPack implements host.Packs. The blobs and the row are written in
// one transaction of its own (not the batched writer's: an archive may be
// large).
func (s *Store) InstallPack(ctx context.Context, p *host.InstalledPack, b host.PackBlobs) (*host.InstalledPack, bool, error) {
	const op = "install pack"
	inst, err := storecore.PackRecord(op, p, b, s.now())
	if err != nil {
		return nil, false, err
	}
	ref := inst.Ref()
	// Installed already (or a conflict): answer without sending blobs that
	// nothing would refer to. The transaction below decides for good.
	if cur, err := scanPack(s.pool.QueryRow(ctx, `SELECT `+packColumns+` FROM packs WHERE name = $1 AND version = $2`, inst.Name, inst.Version)); err == nil {
		return storecore.SamePack(op, cur, inst)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, host.Wrap(op, ref, err)
	}
	prov, err := storecore.EncodeProvenance(inst.Provenance)
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	var out *host.InstalledPack
	var already bool
	err = s.writeAlone(ctx, func(x *tx) error {
		out, already = nil, false
		if err := x.lockPacks(); err != nil {
			return err
		}
		cur, err := scanPack(x.QueryRow(ctx, `SELECT `+packColumns+` FROM packs WHERE name = $1 AND version = $2`, inst.Name, inst.Version))
		if err == nil {
			out, already, err = storecore.SamePack(op, cur, inst)
			return err
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		for _, d := range [][]byte{b.Archive, b.Bundle, b.Provenance, b.Signature} {
			if d != nil {
				if _, err := x.Exec(ctx, `INSERT INTO pack_blobs (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, blobs.Digest(d), d); err != nil {
					return err
				}
			}
		}
		if _, err := x.Exec(ctx, `INSERT INTO packs (`+packColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			inst.Name, inst.Version, inst.SHA256, inst.Size, []byte(inst.Manifest),
			nullable(inst.BundleSHA256), nullable(inst.ProvenanceSHA256), nullable(inst.SignatureSHA256),
			inst.Signer, inst.KeyID, prov, inst.InstalledAt.Format(time.RFC3339Nano)); err != nil {
			return err
		}
		out = inst
		return x.bumpPacks()
	})
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	return out, already, nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func scanPack(row pgx.Row) (*host.InstalledPack, error) {
	var p host.InstalledPack
	var bundle, prov, sig, provJSON *string
	var at string
	var manifest []byte
	if err := row.Scan(&p.Name, &p.Version, &p.SHA256, &p.Size, &manifest, &bundle, &prov, &sig, &p.Signer, &p.KeyID, &provJSON, &at); err != nil {
		return nil, err
	}
	p.Manifest = manifest
	p.BundleSHA256, p.ProvenanceSHA256, p.SignatureSHA256 = deref(bundle), deref(prov), deref(sig)
	var err error
	if p.Provenance, err = storecore.DecodeProvenance(p.Ref(), provJSON); err != nil {
		return nil, err
	}
	p.InstalledAt, _ = time.Parse(time.RFC3339Nano, at)
	p.InstalledAt = p.InstalledAt.UTC()
	return &p, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ListPacks implements host.Packs.
func (s *Store) ListPacks(ctx context.Context) ([]*host.InstalledPack, error) {
	const op = "list packs"
	rows, err := s.pool.Query(ctx, `SELECT `+packColumns+` FROM packs`)
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

// UninstallPacks implements host.Packs: the rows and then the blobs no
// remaining row names, in one transaction.
func (s *Store) UninstallPacks(ctx context.Context, refs []*host.InstalledPack) error {
	const op = "uninstall packs"
	todo, err := storecore.UninstallRefs(op, refs)
	if err != nil || len(todo) == 0 {
		return err
	}
	err = s.write(ctx, func(x *tx) error {
		if err := x.lockPacks(); err != nil {
			return err
		}
		const match = `FROM packs WHERE name = $1 AND version = $2 AND ($3 = '' OR archive_sha256 = $3)`
		var missing []string
		for _, r := range todo {
			var n int
			if err := x.QueryRow(ctx, `SELECT count(*) `+match, r.Name, r.Version, r.SHA256).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				missing = append(missing, r.Ref())
			}
		}
		if len(missing) > 0 {
			return host.Errorf(op, strings.Join(missing, ", "), host.ErrPackNotInstalled, "")
		}
		for _, r := range todo {
			if _, err := x.Exec(ctx, `DELETE `+match, r.Name, r.Version, r.SHA256); err != nil {
				return err
			}
		}
		if _, err := x.Exec(ctx, `DELETE FROM pack_blobs b WHERE NOT EXISTS (SELECT 1 FROM packs p WHERE b.sha256 IN
			(p.archive_sha256, p.bundle_sha256, p.provenance_sha256, p.signature_sha256))`); err != nil {
			return err
		}
		return x.bumpPacks()
	})
	return host.Wrap(op, "", err)
}

// PackBlob implements host.Packs.
func (s *Store) PackBlob(ctx context.Context, digest string) ([]byte, error) {
	const op = "read pack blob"
	if !storecore.IsDigest(digest) {
		return nil, host.Invalid(op, "sha256", "must be 64 lowercase hex digits")
	}
	b, err := s.packBlob(ctx, digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, storecore.ShortDigest(digest), host.ErrNotFound, "no such blob")
	}
	return b, host.Wrap(op, storecore.ShortDigest(digest), err)
}

// packBlob reads a blob and checks it against its digest.
func (s *Store) packBlob(ctx context.Context, digest string) ([]byte, error) {
	var b []byte
	if err := s.pool.QueryRow(ctx, `SELECT data FROM pack_blobs WHERE sha256 = $1`, digest).Scan(&b); err != nil {
		return nil, err
	}
	if blobs.Digest(b) != digest {
		return nil, fmt.Errorf("blob %s is corrupted (its content no longer matches its digest)", storecore.ShortDigest(digest))
	}
	return b, nil
}

// CheckPackIntegrity checks that every blob the index names is present and
// matches its digest. The first failure is returned, naming the pack.
func (s *Store) CheckPackIntegrity(ctx context.Context) error {
	all, err := s.ListPacks(ctx)
	if err != nil {
		return err
	}
	for _, p := range all {
		for _, d := range []string{p.SHA256, p.BundleSHA256, p.ProvenanceSHA256, p.SignatureSHA256} {
			if d == "" {
				continue
			}
			if _, err := s.packBlob(ctx, d); err != nil {
				if errors.Is(err, pgx.ErrNoRows) {
					err = fmt.Errorf("blob %s is missing", storecore.ShortDigest(d))
				}
				return fmt.Errorf("pack integrity: %s: %w", p.Ref(), err)
			}
		}
	}
	return nil
}
