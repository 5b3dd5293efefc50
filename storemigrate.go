package packrun

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/postgres"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storemove"
)

// StoreMigration is what MigrateStore copied: each table's rows in the
// home's store and in PostgreSQL, the blobs read from the home's files,
// and the evidence chain as verified in PostgreSQL.
type StoreMigration = storemove.Report

// MigrateStore copies the home's own SQLite store (packrun.db, the pack
// blobs in blobs/sha256 and the artifact bytes in artifacts/sha256) into
// the PostgreSQL database at to, which must be empty: packs, tasks,
// attempts and the evidence chain (seqs and hashes as they are), memory
// (secret values sealed as they are, so the home's secret key reads them
// there), artifacts, schedules, sensor events, workflows, runs, messages,
// API tokens, agents and task types. The copy is one transaction, and the
// chain is verified in it before it commits: a target that is not empty,
// a blob missing or not matching its sha256, or a chain that does not
// verify leaves the database as it was. The home is read, never written,
// but for the key files openPostgres makes if they are missing; the home
// keeps its trust policy, configuration and key files, which the same
// home uses with Config.Store set to to afterwards. Stop any packrun
// using the home first: rows written during the copy may be left out.
func MigrateStore(ctx context.Context, home, to string, cfg Config) (*StoreMigration, error) {
	if !isPostgresURL(to) {
		return nil, fmt.Errorf("%w: --to %s: want a postgres:// URL", ErrUsage, redactURL(to))
	}
	src := sqlite.ExportFiles{
		DB:          filepath.Join(home, "packrun.db"),
		PackBlobDir: filepath.Join(home, "blobs", "sha256"),
		ArtifactDir: filepath.Join(home, "artifacts", "sha256"),
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s", ErrNoHome, home)
	}
	if _, err := os.Stat(src.DB); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s: the home has no SQLite store to copy", ErrNotFound, src.DB)
	}
	if cfg.SecretKeyFile == "" {
		cfg.SecretKeyFile = os.Getenv(sqlite.SecretKeyEnv)
	}
	if cfg.HostKeyFile == "" {
		cfg.HostKeyFile = os.Getenv(HostKeyEnv)
	}
	cfg.Store = to
	b, err := openPostgres(ctx, home, cfg, nil, nil)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	pg := b.(*postgres.Store)
	exp, err := sqlite.OpenExport(ctx, src)
	if err != nil {
		return nil, err
	}
	defer exp.Close()
	rep, err := pg.Import(ctx, exp)
	if err != nil {
		return nil, err
	}
	// The copy verified the chain in its transaction; this is the check
	// `packrun evidence verify --store` makes, on what was committed.
	if rep.Chain, err = pg.VerifyChain(ctx); err != nil {
		return nil, err
	}
	if !rep.Chain.OK {
		return rep, fmt.Errorf("%w: the evidence chain does not verify in %s after the copy: %v", host.ErrTampered, redactURL(to), rep.Chain.Broken)
	}
	return rep, nil
}
