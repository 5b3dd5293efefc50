package postgres

import (
	"context"
	"crypto/ed25519"
	"errors"
	"sync"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The evidence log (storecore.IntegrateLog) is integrated by a
// storecore.Sequencer on every node, each in a transaction of its own:
// woken by this node's commits that appended chain entries (committed)
// and every logPoll for the other nodes'. The log row's lock (FOR
// UPDATE) makes all but one node wait, and the others then find
// nothing pending.

const (
	logGather = 2 * time.Millisecond
	logEvery  = 10 * time.Millisecond
	logPoll   = 50 * time.Millisecond
)

var _ host.EvidenceLog = (*Store)(nil)

var errNoLogKey = errors.New("the store has no key to sign the evidence log's checkpoints (Options.LogSigner or HostKey)")

type logSigner struct {
	once   sync.Once
	signer *tlog.Signer
	err    error
}

// logSigner is Options.LogSigner, or HostKey under Options.LogOrigin
// (default storecore.LogOrigin of the key); nil when there is neither.
func (s *Store) logSigner() (*tlog.Signer, error) {
	s.logSign.once.Do(func() {
		switch {
		case s.opts.LogSigner != nil:
			s.logSign.signer = s.opts.LogSigner
		case len(s.opts.HostKey) == ed25519.PrivateKeySize:
			origin := s.opts.LogOrigin
			if origin == "" {
				origin = storecore.LogOrigin(s.opts.HostKey.Public().(ed25519.PublicKey))
			}
			s.logSign.signer, s.logSign.err = tlog.NewSigner(origin, s.opts.HostKey)
		}
	})
	return s.logSign.signer, s.logSign.err
}

// logKey is the verifier key of the log key this node was given
// (Options.LogSigner), "" when it signs with its host key.
func (s *Store) logKey() string {
	if s.opts.LogSigner == nil {
		return ""
	}
	return s.opts.LogSigner.VerifierKey()
}

func (s *Store) integrateLog(ctx context.Context, max int) (int, uint64, error) {
	if pending, size, err := storecore.LogPending(ctx, corePool{s.pool}, s.logKey()); err != nil || !pending {
		return 0, size, err
	}
	var sign func(tlog.Checkpoint) ([]byte, error)
	if signer, err := s.logSigner(); err != nil {
		return 0, 0, err
	} else if signer != nil {
		sign = storecore.SignWith(s.logSigner)
	}
	var (
		n    int
		size uint64
	)
	err := s.writeAlone(ctx, func(x *tx) error {
		var err error
		n, size, err = storecore.IntegrateLog(ctx, coreTx{x}, sign, s.logKey(), s.now(), max, &s.logKnown)
		return err
	})
	return n, size, err
}

// LogCheckpoint implements host.EvidenceLog.
func (s *Store) LogCheckpoint(ctx context.Context, size uint64) (*host.LogCheckpoint, error) {
	return storecore.LogCheckpoint(ctx, corePool{s.pool}, size)
}

// LogInclusion implements host.EvidenceLog.
func (s *Store) LogInclusion(ctx context.Context, seq int64, size uint64) (*host.LogProof, error) {
	return storecore.LogInclusion(ctx, corePool{s.pool}, seq, size)
}

// LogConsistency implements host.EvidenceLog.
func (s *Store) LogConsistency(ctx context.Context, from, to uint64) (*host.LogProof, error) {
	return storecore.LogConsistency(ctx, corePool{s.pool}, from, to)
}

// LogSync implements host.EvidenceLog: every entry committed before it
// is linked (a link pass) and integrated.
func (s *Store) LogSync(ctx context.Context) (*host.LogCheckpoint, error) {
	if err := s.link.pass(ctx, false); err != nil {
		return nil, host.Wrap("evidence log sync", "", err)
	}
	if err := s.logSeq.Sync(ctx); err != nil {
		return nil, host.Wrap("evidence log sync", "", err)
	}
	return s.LogCheckpoint(ctx, 0)
}

// LogVerifierKey implements host.EvidenceLog: the log key's when the
// log records one and this node was given none.
func (s *Store) LogVerifierKey() (string, error) {
	signer, err := s.logSigner()
	if err != nil {
		return "", host.Wrap("evidence log verifier key", "", err)
	}
	own := ""
	if signer != nil {
		own = signer.VerifierKey()
	}
	vkey, err := storecore.LogVerifierKey(context.Background(), corePool{s.pool}, s.opts.LogSigner != nil, own)
	if err != nil {
		return "", host.Wrap("evidence log verifier key", "", err)
	}
	return vkey, nil
}

// LogDelays returns the integration delays (durable to provable) of
// this node's entries measured since the last call (the benchmark's).
func (s *Store) LogDelays() []time.Duration { return s.logSeq.Delays() }
