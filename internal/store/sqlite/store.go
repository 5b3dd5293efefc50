package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Compile-time interface guards.
var (
	_ host.Backend   = (*Store)(nil)
	_ host.Evidence  = (*Store)(nil)
	_ host.Memory    = (*Store)(nil)
	_ host.Queue     = (*Store)(nil)
	_ host.Locker    = (*Store)(nil)
	_ host.TaskTypes = (*Store)(nil)
	_ host.Packs     = (*Store)(nil)
)

// Options configure a Store. Zero fields take the defaults.
type Options struct {
	// BlobDir holds artifact bytes as <BlobDir>/<sha256>. Default:
	// <directory of the database>/artifacts/sha256. It must not be
	// PackBlobDir: uninstalling packs deletes every blob there that no
	// installed pack refers to.
	BlobDir string
	// PackBlobDir holds the blobs of installed packs (archives, signature
	// and provenance bundles) as <PackBlobDir>/<sha256>. Default:
	// <directory of the database>/blobs/sha256, where packrun has always
	// kept them.
	PackBlobDir string
	// Now is the clock (default time.Now); tests inject their own.
	Now func() time.Time
	// MaxValueBytes caps one memory value (default 1 MiB).
	MaxValueBytes int64
	// MaxNamespaceBytes caps the keys plus values of one tenant's
	// namespace (default 64 MiB).
	MaxNamespaceBytes int64
	// MaxArtifactBytes caps one artifact (default 64 MiB).
	MaxArtifactBytes int64
	// Backoff is the delay before retry number n (n = the attempts made so
	// far, from 1). Default: 30s·2^(n-1), at most 15 minutes.
	Backoff func(n int) time.Duration
	// MaxBatchOps caps the write operations grouped into one commit
	// (default 256).
	MaxBatchOps int
	// BatchDelay is how long the writer waits for more operations once the
	// queue is empty before committing (default 0: commit at once; batches
	// still form from whatever arrives while the previous commit syncs).
	BatchDelay time.Duration
	// WALReserve is how much of the write-ahead log the store writes
	// with zeros ahead of use, in the background, once opened (default 0:
	// none). An fsync of a commit appended past the end of the file
	// also writes the file's size and new blocks (≈ 0.3 ms a sync on this
	// disk) where one over bytes already written does not (≈ 0.2 ms); the
	// WAL is reused from its start after each checkpoint, so the reserve
	// pays until the WAL reaches its largest size of its own. For a
	// long-running host (serve): a command that opens the store for a
	// moment would write the reserve for nothing. 64 MiB matches the
	// checkpoint interval (wal_autocheckpoint).
	WALReserve int64
	// SecretKeyFile holds the key that seals secret memory values at rest
	// (see secrets.go): 64 hex digits. Default: secret.key beside the
	// database. It is created (0600) when the first secret is stored. Back
	// it up apart from the database: without it the secrets cannot be read.
	SecretKeyFile string
	// HostKeyFile holds the host's Ed25519 key (64 hex digits of seed)
	// that signs the evidence head checkpoints (checkpoint.go). Default:
	// host.key beside the database; created (0600) with the first
	// checkpoint. Keep it where whoever can edit the database cannot: a
	// checkpoint signed with a key the attacker holds proves nothing.
	HostKeyFile string
	// Reanchor opens a store whose evidence anchor is missing, damaged or
	// replaced (which Open otherwise refuses with host.ErrUnanchored), for
	// Reanchor and AnchorState only: the operator's re-anchoring.
	Reanchor bool
	// Quotas are the quota rules applied inside the store's own writes
	// (host.StoreQuotas; nil: none).
	Quotas host.StoreQuotas
	// CheckpointFile is where the signed head checkpoint is written.
	// Default: evidence-head.json beside the database.
	CheckpointFile string
	// OnCommit, if set, is called by the writer after each group commit
	// with the operations it carried and how long the transaction took
	// (BEGIN to COMMIT, before the WAL is synced). It runs on the writer's
	// goroutine, so it must be quick: metrics, not I/O.
	OnCommit func(ops int, took time.Duration)
	// LogSigner signs the evidence log's checkpoints (evidencelog.go)
	// with a log key of their own: the first checkpoint it signs records
	// its verifier key, and Open refuses a signer with another key
	// (storecore.ErrLogKey). Default: the host key (HostKeyFile) under
	// LogOrigin.
	LogSigner *tlog.Signer
	// LogOrigin is the origin line of the log's checkpoints when the
	// host key signs them. Default: packrun.local/ and 16 hex digits of
	// the host key's public half's SHA-256 (storecore.LogOrigin).
	LogOrigin string
}

func (o Options) withDefaults(path string) Options {
	if o.BlobDir == "" {
		o.BlobDir = filepath.Join(filepath.Dir(path), "artifacts", "sha256")
	}
	if o.PackBlobDir == "" {
		o.PackBlobDir = filepath.Join(filepath.Dir(path), "blobs", "sha256")
	}
	if o.SecretKeyFile == "" {
		o.SecretKeyFile = filepath.Join(filepath.Dir(path), "secret.key")
	}
	if o.HostKeyFile == "" {
		o.HostKeyFile = filepath.Join(filepath.Dir(path), "host.key")
	}
	if o.CheckpointFile == "" {
		o.CheckpointFile = filepath.Join(filepath.Dir(path), "evidence-head.json")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 20
	}
	if o.MaxNamespaceBytes <= 0 {
		o.MaxNamespaceBytes = 64 << 20
	}
	if o.MaxArtifactBytes <= 0 {
		o.MaxArtifactBytes = 64 << 20
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBatchOps <= 0 {
		o.MaxBatchOps = 256
	}
	return o
}

// DefaultBackoff is 30s·2^(n-1), at most 15 minutes
// (storecore.DefaultBackoff).
func DefaultBackoff(n int) time.Duration { return storecore.DefaultBackoff(n) }

// Store is the SQLite backend of the host services.
type Store struct {
	// Ops are the methods written once in storecore (sensors,
	// schedules, the dispatch lock, anchoring, tenant counts).
	storecore.Ops
	db     *sql.DB
	w      *writer
	opts   Options
	gens   gens
	mc     *memCache    // memory entries read (memCache)
	routes *routeCache  // task types resolved (routeCache)
	config *configCache // task type specs, agents, profiles read (configCache)
	subs   *subsCache   // message subscriptions (subsCache)
	tokens *tokenCache  // API tokens read (tokenCache)
	keys   *keyring     // seals secret memory values (secrets.go)
	// hostKey signs, and cp writes, the evidence head checkpoints
	// (checkpoint.go).
	hostKey *evidence.HostKey
	cp      *evidence.Anchor
	// logSeq integrates the evidence log, signed by logSign
	// (evidencelog.go).
	logSeq  *storecore.Sequencer
	logSign logSigner
	// logKnown: the chain entries the writer committed, not yet
	// integrated (storecore.KnownEntries).
	logKnown storecore.KnownEntries
	// stopReserve ends the WAL reserve (Options.WALReserve), which closes
	// reserved when it returns, after setting reserveErr (why it stopped
	// short, if it did); both nil without one.
	stopReserve context.CancelFunc
	reserved    chan struct{}
	reserveErr  error
	// values: the attempt values this Store hashed and stored lately
	// (evidence.Values), so a repeated value is hashed and written once.
	values evidence.Values
	// uninstalling serialises UninstallPacks within this Store, so that
	// no other uninstall's deletion shares a batch with a sweep of pack
	// blobs (see sweepPackBlobs).
	uninstalling sync.Mutex
	// beforeInstallTx, if set (by tests), runs in InstallPack between
	// writing the blobs and the transaction that records them.
	beforeInstallTx func()
	// Configs implements host.Agents and host.TaskTypeSpecs (agents.go).
	storecore.Configs
}

// Open opens (creating if needed) the database at path, applies the host's
// migrations, seals secret memory values an older packrun stored in
// plaintext, and starts the writer. The database is its owner's alone
// (openDB), and so are the artifact and pack blob directories.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	opts = opts.withDefaults(path)
	if sameDir(opts.BlobDir, opts.PackBlobDir) {
		return nil, fmt.Errorf("open host store: artifacts and pack blobs share %s: uninstalling a pack would delete the artifacts", opts.BlobDir)
	}
	for _, dir := range []string{opts.BlobDir, opts.PackBlobDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("open host store: %w", err)
		}
	}
	d, err := openDB(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open host store: %w", err)
	}
	if err := migrateDB(ctx, d, "host", migrations); err != nil {
		d.Close()
		return nil, fmt.Errorf("open host store: %w", err)
	}
	if _, err := moveLegacyAttempts(ctx, d); err != nil {
		d.Close()
		return nil, fmt.Errorf("open host store: carry attempts over to attempt records: %w", err)
	}
	keys := &keyring{path: opts.SecretKeyFile, db: d}
	if err := sealPlaintextSecrets(ctx, d, keys); err != nil {
		d.Close()
		return nil, fmt.Errorf("open host store: seal plaintext secret values: %w", err)
	}
	gens, err := openGens(path)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("open host store: %w", err)
	}
	hk := evidence.NewHostKey(opts.HostKeyFile)
	cp := evidence.NewAnchor(opts.CheckpointFile, hk, opts.Now)
	s := &Store{}
	logSeq := storecore.NewSequencer(s.integrateLog, logGather, logEvery, 0)
	onHead := func(h eventHead) {
		cp.Offer(h.seq, h.hash)
		logSeq.Appended(h.seq)
	}
	w, err := startWriter(ctx, d, path+"-wal", opts.MaxBatchOps, opts.BatchDelay, onHead, opts.OnCommit)
	if err != nil {
		cp.Close()
		gens.close()
		d.Close()
		return nil, fmt.Errorf("open host store: %w", err)
	}
	*s = Store{db: d, w: w, opts: opts, gens: gens, mc: newMemCache(gens.memory), routes: newRouteCache(gens.routes), config: newConfigCache(gens.routes), subs: newSubsCache(gens.routes), tokens: newTokenCache(gens.routes), keys: keys, hostKey: hk, cp: cp, logSeq: logSeq}
	w.x.known = &s.logKnown // before any operation reaches the writer
	s.Ops = storecore.NewOps(s.queue, storecore.SQLiteDialect, opts.Quotas, s.anchoring)
	s.Configs.Driver = configDriver{s}
	if err := s.openAnchor(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open host store: %w", err)
	}
	if opts.LogSigner != nil {
		if err := storecore.CheckLogKey(ctx, coreDB{s}, opts.LogSigner.VerifierKey()); err != nil {
			s.Close()
			return nil, fmt.Errorf("open host store: %w", err)
		}
	}
	// The chain's entries not integrated yet (a home's chain from before
	// the log, or what a crash left pending) are integrated before Open
	// returns; a failure is LogSync's to report, not Open's (VerifyChain
	// must still run on a damaged chain).
	logSeq.Start()
	if !opts.Reanchor {
		_ = logSeq.Sync(ctx) // kept for LogSync
	}
	s.sweepTemp()
	s.sweepPackTemp()
	// Last: the reserve is for the store's work, not its start-up's (the
	// log's first integration, the anchor), and a failed Open has none
	// to stop.
	if opts.WALReserve > 0 {
		rctx, stop := context.WithCancel(context.Background())
		s.stopReserve, s.reserved = stop, make(chan struct{})
		go func() {
			defer close(s.reserved)
			s.reserveErr = w.reserveWAL(rctx, opts.WALReserve)
		}()
	}
	return s, nil
}

// sameDir reports whether a and b name the same directory path.
func sameDir(a, b string) bool {
	if aa, err := filepath.Abs(a); err == nil {
		a = aa
	}
	if bb, err := filepath.Abs(b); err == nil {
		b = bb
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// Close commits every operation already accepted, stops the writer and
// closes the database. Operations submitted afterwards fail with
// host.ErrClosed. Close is idempotent.
func (s *Store) Close() error {
	if s.logSeq != nil {
		s.logSeq.Close()
	}
	if s.stopReserve != nil {
		s.stopReserve()
		<-s.reserved
		s.stopReserve = nil
	}
	werr := s.w.close()
	if werr == errAlreadyClosed {
		return nil
	}
	if err := s.cp.Close(); err != nil && werr == nil {
		werr = fmt.Errorf("write the evidence head checkpoint: %w", err)
	}
	if err := s.db.Close(); err != nil && werr == nil {
		werr = err
	}
	s.gens.close()
	return werr
}

// AwaitWALReserve waits until the WAL reserve (Options.WALReserve) is
// written, and returns what stopped it short if something did (nil
// without a reserve), or ctx's error if ctx ends first.
func (s *Store) AwaitWALReserve(ctx context.Context) error {
	if s.reserved == nil {
		return nil
	}
	select {
	case <-s.reserved:
		return s.reserveErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

// queryRow runs a short read on the pool with a cached prepared statement.
// It does not pass ctx's cancellation on: for a cancellable context
// database/sql and go-sqlite3 each start a watcher goroutine per statement,
// which costs more than these indexed lookups take.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	st, err := s.w.cache.get(query)
	if err != nil {
		return s.db.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// query is queryRow for a short read of a few rows.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	st, err := s.w.cache.get(query)
	if err != nil {
		return s.db.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// ts formats a time for storage.
func ts(t time.Time) string { return host.FormatTime(t) }

// parseTS reads a stored time; a malformed value is the zero time.
func parseTS(v string) time.Time {
	t, _ := host.ParseTime(v)
	return t
}

func parseNullTS(v sql.NullString) *time.Time {
	if !v.Valid {
		return nil
	}
	t := parseTS(v.String)
	return &t
}
