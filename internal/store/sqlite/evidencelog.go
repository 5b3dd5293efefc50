package sqlite

import (
	"context"
	"crypto/ed25519"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The evidence log (storecore.IntegrateLog) is integrated by a
// storecore.Sequencer through the single writer: woken when a synced
// batch appended chain entries (writer.onHead), it gathers for
// logGather and integrates everything pending in one write transaction.

// logGather is how long the sequencer waits after being woken, so that
// the batches committed meanwhile are integrated together; logEvery the
// least time between two integrations (under load a batch and its
// signature serve many entries; idle, an entry waits logGather). An
// integration is a write transaction of its own, with its signature,
// tiles, commit and sync, in the single writer's queue: at 10 ms it took
// a sixth of the writer's CPU at one caller; at 40 ms an entry is
// provable within ≈ 41 ms at the 99th percentile (the bound is
// 100 ms; RATIONALE.md, "Why SQLite integrates at most every 40 ms").
const (
	logGather = 2 * time.Millisecond
	logEvery  = 40 * time.Millisecond
)

var _ host.EvidenceLog = (*Store)(nil)

// logSigner signs the log's checkpoints: Options.LogSigner, or the host
// key under Options.LogOrigin (default storecore.LogOrigin of the key),
// built once, creating the host key if the home has none yet.
type logSigner struct {
	mu     sync.Mutex
	signer *tlog.Signer
}

func (s *Store) logSigner() (*tlog.Signer, error) {
	s.logSign.mu.Lock()
	defer s.logSign.mu.Unlock()
	if s.logSign.signer != nil {
		return s.logSign.signer, nil
	}
	if s.opts.LogSigner != nil {
		s.logSign.signer = s.opts.LogSigner
		return s.logSign.signer, nil
	}
	key, err := s.hostKey.Signing()
	if err != nil {
		return nil, err
	}
	origin := s.opts.LogOrigin
	if origin == "" {
		origin = storecore.LogOrigin(key.Public().(ed25519.PublicKey))
	}
	if s.logSign.signer, err = tlog.NewSigner(origin, key); err != nil {
		return nil, err
	}
	return s.logSign.signer, nil
}

// integrateLog integrates up to max pending entries in one write
// transaction of the writer.
// logKey is the verifier key of the log key this store was given
// (Options.LogSigner), "" when it signs with the host key.
func (s *Store) logKey() string {
	if s.opts.LogSigner == nil {
		return ""
	}
	return s.opts.LogSigner.VerifierKey()
}

func (s *Store) integrateLog(ctx context.Context, max int) (int, uint64, error) {
	if pending, size, err := storecore.LogPending(ctx, coreDB{s}, s.logKey()); err != nil || !pending {
		return 0, size, err
	}
	var (
		n    int
		size uint64
	)
	sign := storecore.SignWith(s.logSigner)
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		n, size, err = storecore.IntegrateLog(ctx, coreTx{s: s, tx: tx}, sign, s.logKey(), s.now(), max, &s.logKnown)
		return err
	})
	return n, size, err
}

// LogCheckpoint implements host.EvidenceLog.
func (s *Store) LogCheckpoint(ctx context.Context, size uint64) (*host.LogCheckpoint, error) {
	return storecore.LogCheckpoint(ctx, coreDB{s}, size)
}

// LogInclusion implements host.EvidenceLog.
func (s *Store) LogInclusion(ctx context.Context, seq int64, size uint64) (*host.LogProof, error) {
	return storecore.LogInclusion(ctx, coreDB{s}, seq, size)
}

// LogConsistency implements host.EvidenceLog.
func (s *Store) LogConsistency(ctx context.Context, from, to uint64) (*host.LogProof, error) {
	return storecore.LogConsistency(ctx, coreDB{s}, from, to)
}

// LogSync implements host.EvidenceLog.
func (s *Store) LogSync(ctx context.Context) (*host.LogCheckpoint, error) {
	if err := s.logSeq.Sync(ctx); err != nil {
		return nil, host.Wrap("evidence log sync", "", err)
	}
	return s.LogCheckpoint(ctx, 0)
}

// LogVerifierKey implements host.EvidenceLog: the log key's when the
// log records one and this store was given none.
func (s *Store) LogVerifierKey() (string, error) {
	signer, err := s.logSigner()
	if err != nil {
		return "", host.Wrap("evidence log verifier key", "", err)
	}
	vkey, err := storecore.LogVerifierKey(context.Background(), coreDB{s}, s.opts.LogSigner != nil, signer.VerifierKey())
	if err != nil {
		return "", host.Wrap("evidence log verifier key", "", err)
	}
	return vkey, nil
}

// LogDelays returns the integration delays (durable to provable) of
// this store's entries measured since the last call (the benchmark's).
func (s *Store) LogDelays() []time.Duration { return s.logSeq.Delays() }
