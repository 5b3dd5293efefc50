package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/packrun/packrun/host"
)

// Compile-time interface guards: what this backend implements so far.
var (
	_ host.Queue  = (*Store)(nil)
	_ host.Locker = (*Store)(nil)
)

// Options configure a Store. Zero fields take the defaults.
type Options struct {
	// Now is the clock (default time.Now); tests inject their own. Nodes
	// on separate machines compare leases with their own clocks: keep
	// them synchronised (NTP) well within LeaseTTL.
	Now func() time.Time
	// LeaseTTL is how long a claim holds its task without a heartbeat
	// (default 30s): past it, any node may reclaim the task.
	LeaseTTL time.Duration
	// Backoff is the delay before retry number n (n = the attempts made
	// so far, from 1). Default: 30s·2^(n-1), at most 15 minutes, as
	// internal/sqlite.
	Backoff func(n int) time.Duration
	// MaxConns caps the pool's connections (default: pgxpool's, the
	// larger of 4 and the number of CPUs).
	MaxConns int32
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	return o
}

// DefaultBackoff is 30s·2^(n-1), at most 15 minutes.
func DefaultBackoff(n int) time.Duration {
	n = max(n, 1)
	if n > 6 {
		return 15 * time.Minute
	}
	return min(30*time.Second<<(n-1), 15*time.Minute)
}

// Store is the PostgreSQL backend of the host services.
type Store struct {
	pool *pgxpool.Pool
	opts Options
}

// Open connects to the database dsn names (a postgres:// URL or a
// key=value string) and applies the host's migrations.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	s := &Store{pool: pool, opts: opts.withDefaults()}
	if err := migrate(ctx, s); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return s, nil
}

// Close closes the pool, waiting for the connections in use.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
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

// tx is one write transaction: the pgx transaction and the chain entries
// its operation appended, linked into the chain when it commits (see
// flush).
type tx struct {
	pgx.Tx
	s       *Store
	pending []pendingEntry
}

// maxTries bounds how often write runs an operation that PostgreSQL
// aborted for a deadlock or a serialization failure.
const maxTries = 5

// write runs fn in a transaction (READ COMMITTED), appends the chain
// entries it queued, and commits. A transaction PostgreSQL aborts for a
// deadlock or a serialization failure is run again, so fn must start
// from its caller's values each time. An error from fn (or the commit)
// rolls back everything, chain entries included.
func (s *Store) write(ctx context.Context, fn func(*tx) error) error {
	for try := 1; ; try++ {
		err := s.writeOnce(ctx, fn)
		if err == nil || try == maxTries || !retryable(err) {
			return err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, fn func(*tx) error) error {
	ptx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	x := &tx{Tx: ptx, s: s}
	if err = fn(x); err == nil {
		if err = x.flush(ctx); err == nil {
			return ptx.Commit(ctx)
		}
	}
	ptx.Rollback(context.WithoutCancel(ctx))
	return err
}

// retryable reports a deadlock or serialization failure.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// uniqueViolation reports an insert refused by a unique index.
func uniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
