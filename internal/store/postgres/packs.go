package postgres

import (
	"context"
	"errors"
	"fmt"
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

// packTx is a write transaction as storecore's pack rules see it: the
// blobs are rows of pack_blobs, and the installed set changes under the
// packs generation row's lock.
type packTx struct{ coreTx }

func (p packTx) LockPacks(context.Context) error { return p.x.lockPacks() }

func (p packTx) PutPackBlobs(ctx context.Context, data [][]byte) error {
	for _, d := range data {
		if d != nil {
			if _, err := p.x.Exec(ctx, `INSERT INTO pack_blobs (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`, blobs.Digest(d), d); err != nil {
				return err
			}
		}
	}
	return nil
}

// DropPackBlobs deletes the blobs no remaining row names, in the
// uninstall's transaction.
func (p packTx) DropPackBlobs(ctx context.Context) error {
	_, err := p.x.Exec(ctx, `DELETE FROM pack_blobs b WHERE NOT EXISTS (SELECT 1 FROM packs p WHERE b.sha256 IN
		(p.archive_sha256, p.bundle_sha256, p.provenance_sha256, p.signature_sha256))`)
	return err
}

func (p packTx) PacksChanged(context.Context) error { return p.x.bumpPacks() }

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
	if cur, err := storecore.FindPack(ctx, corePool{s.pool}, inst.Name, inst.Version); err == nil {
		return storecore.SamePack(op, cur, inst)
	} else if !errors.Is(err, storecore.ErrNoRows) {
		return nil, false, host.Wrap(op, ref, err)
	}
	var out *host.InstalledPack
	var already bool
	err = s.writeAlone(ctx, func(x *tx) error {
		var err error
		out, already, err = storecore.InstallPack(ctx, packTx{coreTx{x}}, op, inst, b)
		return err
	})
	if err != nil {
		return nil, false, host.Wrap(op, ref, err)
	}
	return out, already, nil
}

// ListPacks implements host.Packs.
func (s *Store) ListPacks(ctx context.Context) ([]*host.InstalledPack, error) {
	out, err := storecore.ListPacks(ctx, corePool{s.pool})
	return out, host.Wrap("list packs", "", err)
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
		return storecore.UninstallPacks(ctx, packTx{coreTx{x}}, op, todo)
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
