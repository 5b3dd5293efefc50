package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Compile-time interface guards: what this backend implements so far.
var (
	_ host.Evidence = (*Store)(nil)
	_ host.Queue    = (*Store)(nil)
	_ host.Locker   = (*Store)(nil)
)

// Options configure a Store. Zero fields take the defaults.
type Options struct {
	// Now is the clock (default time.Now); tests inject their own. Nodes
	// on separate machines compare leases with their own clocks: keep
	// them synchronised (NTP) well within LeaseTTL.
	Now func() time.Time
	// LeaseTTL is how long a claim holds its task without a heartbeat
	// (default 30s): past it, any node may reclaim the task. It is also
	// a quarter of it the store's connections'
	// idle_in_transaction_session_timeout (unless the DSN sets one): a
	// node stopped in the middle of a write transaction (paused, swapped
	// out) would otherwise hold its locks, the evidence chain's among
	// them, and stall every other node for as long as it is stopped (long
	// enough for their leases to expire too); the server ends its session
	// instead, and the transaction rolls back.
	LeaseTTL time.Duration
	// Backoff is the delay before retry number n (n = the attempts made
	// so far, from 1). Default: 30s·2^(n-1), at most 15 minutes, as
	// internal/store/sqlite.
	Backoff func(n int) time.Duration
	// MaxConns caps the pool's connections (default: pgxpool's, the
	// larger of 4 and the number of CPUs).
	MaxConns int32
	// HostKey seals exported attempt bundles (ExportAttempt) and
	// exported digests (SealDigest; HostPublicKey is its public half);
	// without it they fail. Each node may have its own.
	HostKey ed25519.PrivateKey
	// Quotas are the quota rules applied inside the store's own writes
	// (host.StoreQuotas; nil: none).
	Quotas host.StoreQuotas
	// MaxArtifactBytes caps one artifact (default 64 MiB).
	MaxArtifactBytes int64
	// Writers is how many transactions of batched write operations this
	// store runs at once. By default Open times a few round trips to the
	// database and runs 2 (one fills while the other commits) when it is
	// near, 4 when a round trip takes longer than nearRoundTrip: a
	// batch's operations wait for their round trips one after another, so
	// more batches at once hide the network, while on one machine they
	// only split the batches (writersFor). See writer.go.
	Writers int
	// MaxValueBytes caps one memory value (default 1 MiB).
	MaxValueBytes int64
	// MaxNamespaceBytes caps the keys plus values of one tenant's
	// namespace (default 64 MiB).
	MaxNamespaceBytes int64
	// SecretKey (storecore.SecretKeyLen raw bytes) seals secret memory
	// values at rest; every node of one database needs the same key.
	// Without it, storing or reading a secret value fails (memory.go).
	SecretKey []byte
	// CheckpointFile is where this node writes the signed head
	// checkpoint (checkpoint.go): the newest head of the chain its own
	// transactions committed, signed with HostKey, which it needs.
	// Give each node its own (root stores.go: evidence-head.json in the
	// node's home). Empty: no checkpoint, and VerifyChain reports none.
	CheckpointFile string
	// LogSigner signs the evidence log's checkpoints (evidencelog.go)
	// with the cluster's log key: give every node of a cluster the same.
	// The first checkpoint it signs records its verifier key in the
	// database; Open refuses a signer with another key
	// (storecore.ErrLogKey), and a node given none then integrates
	// nothing (the nodes holding the key do). Default: HostKey under
	// LogOrigin; with neither, checkpoints are stored unsigned.
	LogSigner *tlog.Signer
	// LogOrigin is the origin line of the log's checkpoints when HostKey
	// signs them. Default: storecore.LogOrigin of HostKey.
	LogOrigin string
	// Reanchor opens a store whose anchor (this node's checkpoint or host
	// key) is lost, which Open otherwise refuses with host.ErrUnanchored,
	// for Reanchor and AnchorState only: the operator's re-anchoring.
	Reanchor bool
	// tracer sees every statement the pool's connections send (tests
	// count the network round trips of an operation with it).
	tracer pgx.QueryTracer
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.Backoff == nil {
		o.Backoff = storecore.DefaultBackoff
	}
	if o.MaxArtifactBytes <= 0 {
		o.MaxArtifactBytes = 64 << 20
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 20
	}
	if o.MaxNamespaceBytes <= 0 {
		o.MaxNamespaceBytes = 64 << 20
	}
	return o
}

// Store is the PostgreSQL backend of the host services.
type Store struct {
	// Ops are the methods written once in storecore (sensors,
	// schedules, the dispatch lock, anchoring, tenant counts).
	storecore.Ops
	pool *pgxpool.Pool
	opts Options
	w    *writers
	// logKnown: the chain entries this node placed (its writers alone,
	// its link passes) that its sequencer has not integrated yet
	// (storecore.KnownEntries).
	logKnown storecore.KnownEntries
	// secret seals secret memory values (nil: Options.SecretKey unset).
	secret *storecore.SecretKey
	// anchor writes and checks this node's signed head checkpoint (nil:
	// Options.CheckpointFile unset; checkpoint.go).
	anchor *evidence.Anchor
	// values: the attempt values this node hashed and stored lately
	// (evidence.Values), so a repeated value is hashed and written once.
	values evidence.Values
	// closeOnce makes Close idempotent; closeErr is the first Close's.
	closeOnce sync.Once
	closeErr  error
	// Configs implements host.Agents and host.TaskTypeSpecs (agents.go).
	storecore.Configs
	// logSeq integrates the evidence log, signed by logSign
	// (evidencelog.go).
	logSeq  *storecore.Sequencer
	logSign logSigner
	// link gives pending chain entries their places (link.go).
	link *linker
	// setups are the task setups read at the configuration version this
	// node saw last (setupcache.go).
	setups setupCache
	// rtt is the round trip to the database Open measured to choose the
	// writer count (0 when Options.Writers was given).
	rtt time.Duration
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string) and applies the host's migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	opts = opts.withDefaults()
	var secret *storecore.SecretKey
	if opts.SecretKey != nil {
		if secret, err = storecore.NewSecretKey(opts.SecretKey); err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
	}
	if opts.CheckpointFile != "" && len(opts.HostKey) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("open postgres store: %w", errCheckpointNoKey)
	}
	if _, set := cfg.ConnConfig.RuntimeParams[idleInTx]; !set {
		cfg.ConnConfig.RuntimeParams[idleInTx] = fmt.Sprint(max(opts.LeaseTTL.Milliseconds()/4, 1))
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.tracer != nil {
		cfg.ConnConfig.Tracer = opts.tracer
	}
	// The writers hold a connection each, the linker's listener one;
	// reads need some too.
	cfg.MaxConns = max(cfg.MaxConns, int32(max(opts.Writers, farWriters))+3) // and the linker's listener
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{pool: pool, opts: opts, secret: secret}
	s.Ops = storecore.NewOps(s.queue, storecore.PostgresDialect, opts.Quotas, s.anchoring)
	s.Configs.Driver = configDriver{s}
	s.logSeq = storecore.NewSequencer(s.integrateLog, logGather, logEvery, logPoll)
	s.link = newLinker(s)
	if err := migrate(ctx, s); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if opts.LogSigner != nil {
		if err := storecore.CheckLogKey(ctx, corePool{pool}, opts.LogSigner.VerifierKey()); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
	}
	if s.opts.Writers <= 0 {
		rtt, err := roundTrip(ctx, pool)
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		s.opts.Writers, s.rtt = writersFor(rtt), rtt
	}
	if opts.CheckpointFile != "" {
		s.anchor = evidence.NewAnchor(opts.CheckpointFile, hostKeyOf(opts.HostKey), opts.Now)
		if err := s.openAnchor(ctx); err != nil {
			s.anchor.Close()
			pool.Close()
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
	}
	s.w = startWriters(s, s.opts.Writers)
	// The entries a crash left pending are linked, then those not
	// integrated yet (a database's chain from before the
	// log, what a crash left pending) are integrated before Open returns;
	// a failure is LogSync's to report, not Open's.
	var head int64
	var hash string
	if err := pool.QueryRow(ctx, headQuery).Scan(&head, &hash); err == nil {
		s.link.saw(head) // none (an empty chain): 0
	}
	_ = s.link.pass(ctx, true) // the loop tries again; LogSync's own pass reports a failure
	s.link.start()
	s.logSeq.Start()
	_ = s.logSeq.Sync(ctx) // kept for LogSync
	return s, nil
}

// idleInTx is the server setting that ends a session left idle inside a
// transaction for longer than it (milliseconds).
const idleInTx = "idle_in_transaction_session_timeout"

// Close stops the writers once the operations they took are done, writes
// the last head this node committed to its checkpoint, and closes the
// pool. Writes submitted afterwards fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.w.close()
		_ = s.link.pass(context.Background(), true) // what is left pending, a later pass links
		s.link.close()
		s.logSeq.Close()
		if s.anchor != nil {
			if err := s.anchor.Close(); err != nil {
				s.closeErr = fmt.Errorf("write the evidence head checkpoint: %w", err)
			}
		}
		s.pool.Close()
	})
	return s.closeErr
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func (s *Store) now() time.Time { return s.opts.Now().UTC() }

// ts encodes a stored time (host.FormatTime: text order is time order).
func ts(t time.Time) string { return host.FormatTime(t) }

// parseTS reads a stored time; a malformed value is the zero time.
func parseTS(v string) time.Time {
	t, _ := host.ParseTime(v)
	return t
}

func parseNullTS(v *string) *time.Time {
	if v == nil {
		return nil
	}
	t := parseTS(*v)
	return &t
}

// tx is one write transaction: the pgx transaction, the chain entries
// its operations appended, linked into the chain when it commits (see
// flush), and the context its statements run on.
type tx struct {
	Tx      *lazyTx
	s       *Store
	ctx     context.Context
	pending []pendingEntry
	// after are statements that need the seqs flush assigns (a row
	// naming its event), queued in flush's batch after the entries.
	after []func(*pgx.Batch)
	// sp names the savepoint of the batched operation running: each has
	// its own (savepointName), so that rolling back to one that was
	// never set fails, instead of undoing the operation before it.
	sp string
	// savepoint: a batched operation's savepoint is still to be sent,
	// with its first statement (writers.batch).
	savepoint bool
	// linked are run once the entries have their places (onLinked).
	linked []func()
	// ticket is what flush left for the entries it inserted pending: once
	// the transaction commits, its writer waits on it (ticket.await).
	ticket *ticket
	// placing: the transaction holds the chain lock to place its entries
	// (flushPlaced), until it ends (endPlacing).
	placing bool
	// final is what flush left to send with the COMMIT (commit): the
	// entries' inserts and the statements that follow them.
	final *pgx.Batch
}

// commit sends the transaction's final statements with its COMMIT, in
// one round trip.
func (x *tx) commit(ctx context.Context) error {
	err := x.Tx.commitWith(ctx, x.final)
	x.endPlacing()
	x.final = nil
	if err == nil && x.ticket != nil && x.ticket.placed {
		x.s.logKnown.Add(knownOf(x.ticket.entries)...)
	}
	if uniqueViolation(err, "attempt_records_attempt_id_key") {
		return errAttemptExists
	}
	return err
}

// maxTries bounds how often write runs an operation that PostgreSQL
// aborted for a deadlock or a serialization failure.
const maxTries = 5

// write runs fn in a transaction (READ COMMITTED), shared with other
// write operations of this store (see writer.go), appends the chain
// entries it queued, and commits. fn may run more than once (a batch that
// failed is run again, a deadlock retried), so it must start from its
// caller's values each time. An error from fn rolls back what it did,
// chain entries included; fn's statements run on the writer's context,
// not ctx.
func (s *Store) write(ctx context.Context, fn func(*tx) error) error {
	return s.w.do(ctx, fn)
}

// writeAlone runs fn in a transaction of its own, retrying a deadlock or
// serialization failure, and waits for its chain entries to be linked.
func (s *Store) writeAlone(ctx context.Context, fn func(*tx) error) error {
	t, err := s.writeAloneTicket(ctx, fn)
	t.await(ctx)
	return err
}

// writeAloneTicket is writeAlone without the wait: the caller awaits the
// ticket (nil: nothing to wait for).
func (s *Store) writeAloneTicket(ctx context.Context, fn func(*tx) error) (*ticket, error) {
	for try := 1; ; try++ {
		t, err := s.writeOnce(ctx, fn)
		if err == nil || try == maxTries || !retryable(err) {
			return t, err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(*tx) error) (*ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	ltx, err := begin(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	x := &tx{Tx: ltx, s: s, ctx: ctx}
	if err = fn(x); err == nil {
		if err = x.flush(ctx); err == nil {
			if err = x.commit(ctx); err == nil {
				return x.ticket, nil
			}
		}
	}
	if x.ticket != nil {
		s.link.forget(x.ticket)
	}
	x.rollback()
	return nil, err
}

// retryable reports a deadlock or serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// uniqueViolation reports an insert refused by the unique index named.
func uniqueViolation(err error, index string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == index
}

// The writers a store runs by default (Options.Writers): nearWriters when
// a round trip to the database takes at most nearRoundTrip (the same
// machine, or a rack away), farWriters beyond. Measured with
// BenchmarkPGRoundTrip (BENCHMARKS.md, "PostgreSQL: writers by the
// database's distance"): on one machine 4 writers did fewer jobs a second
// than 2; 0.5 ms away they did 20-25 % more.
const (
	nearRoundTrip = 300 * time.Microsecond
	nearWriters   = 2
	farWriters    = 4
)

func writersFor(rtt time.Duration) int {
	if rtt <= nearRoundTrip {
		return nearWriters
	}
	return farWriters
}

// roundTrip is the median of five round trips to the database on one of
// pool's connections.
func roundTrip(ctx context.Context, pool *pgxpool.Pool) (time.Duration, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var took [5]time.Duration
	for i := range took {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, `SELECT 1`); err != nil {
			return 0, fmt.Errorf("time a round trip to the database: %w", err)
		}
		took[i] = time.Since(t0)
	}
	slices.Sort(took[:])
	return took[len(took)/2], nil
}

// rollback ends the transaction if commit has not (a no-op after it).
func (x *tx) rollback() {
	x.Tx.Rollback(x.ctx)
	x.endPlacing()
}

// endPlacing notes that the transaction, ended, no longer holds the chain
// lock.
func (x *tx) endPlacing() {
	if x.placing {
		x.placing = false
		x.s.link.placing.Add(-1)
	}
}
