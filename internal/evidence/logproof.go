package evidence

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// LogBackend is what proving an entry of the evidence log reads: the
// chain (to find an attempt's or an event's entry) and the log.
type LogBackend interface {
	Attempt(ctx context.Context, id string) (*host.Attempt, error)
	Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error)
	host.EvidenceLog
}

// ResolveEntry finds the chain entry ref names, an event's seq (decimal)
// or an attempt id (its attempt_recorded entry), and returns its seq and
// its log entry (the 32 bytes of its chain hash). With tenant set, only
// that tenant's entries are found: another tenant's is ErrNotFound, as if
// it did not exist.
func ResolveEntry(ctx context.Context, b LogBackend, ref, tenant string) (int64, []byte, error) {
	const op = "evidence log entry"
	var e *host.Event
	if seq, err := strconv.ParseInt(ref, 10, 64); err == nil {
		if seq < 1 {
			return 0, nil, host.Invalid(op, "entry", "entry %d: chain entries are numbered from 1", seq)
		}
		evs, err := b.Events(ctx, host.EventFilter{AfterSeq: seq - 1, Limit: 1, Tenant: tenant})
		if err != nil {
			return 0, nil, err
		}
		if len(evs) == 0 || evs[0].Seq != seq {
			return 0, nil, host.Errorf(op, ref, host.ErrNotFound, "no evidence entry %d", seq)
		}
		e = evs[0]
	} else {
		a, err := b.Attempt(ctx, ref)
		if err != nil {
			return 0, nil, err
		}
		at := a.Tenant
		if at == "" {
			at = host.DefaultTenant
		}
		if tenant != "" && at != tenant {
			return 0, nil, host.Errorf(op, ref, host.ErrNotFound, "no attempt %s", host.ShortName(ref))
		}
		evs, err := b.Events(ctx, host.EventFilter{AttemptID: ref, Type: host.EventAttemptRecorded, Limit: 1})
		if err != nil {
			return 0, nil, err
		}
		if len(evs) == 0 {
			return 0, nil, host.Errorf(op, ref, host.ErrNotFound, "attempt %s has no attempt_recorded entry", host.ShortName(ref))
		}
		e = evs[0]
	}
	entry, err := hex.DecodeString(e.Hash)
	if err != nil || len(entry) != tlog.HashSize {
		return 0, nil, host.Wrap(op, ref, fmt.Errorf("entry %d: chain hash %q is not 32 bytes of hex", e.Seq, host.ShortName(e.Hash)))
	}
	return e.Seq, entry, nil
}

// ProveEntry returns the inclusion bundle of the chain entry of seq
// (whose log entry is entry) in the log of the given size (0: the
// newest), integrating the log first if the entry is not yet. The bundle
// names the log's verifier key and is checked before it is returned.
func ProveEntry(ctx context.Context, b host.EvidenceLog, seq int64, entry []byte, size uint64) (*tlog.Bundle, error) {
	const op = "evidence log inclusion proof"
	p, err := b.LogInclusion(ctx, seq, size)
	if errors.Is(err, host.ErrNotFound) {
		if _, serr := b.LogSync(ctx); serr != nil {
			return nil, serr
		}
		p, err = b.LogInclusion(ctx, seq, size)
	}
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(p.LeafHash, tlog.LeafHash(entry)) {
		return nil, host.Wrap(op, fmt.Sprint(seq), fmt.Errorf("the log's leaf %d is not the chain entry of seq %d", p.Index, seq))
	}
	cp, err := b.LogCheckpoint(ctx, p.Size)
	if err != nil {
		return nil, err
	}
	vkey, err := b.LogVerifierKey()
	if err != nil {
		return nil, err
	}
	out := &tlog.Bundle{Entry: entry, Index: p.Index, Proof: p.Hashes, Checkpoint: cp.Note, VerifierKey: vkey}
	if vkey != "" {
		if _, err := tlog.CheckEntry(out, vkey); err != nil {
			return nil, host.Wrap(op, fmt.Sprint(seq), err)
		}
	}
	return out, nil
}

// ProveSince adds to bundle the consistency proof from the older
// checkpoint saved (a signed note of this log, an auditor's) to the
// bundle's checkpoint. A checkpoint not of this log, newer than the
// bundle's, or with which the log is not consistent is refused.
func ProveSince(ctx context.Context, b host.EvidenceLog, bundle *tlog.Bundle, saved []byte) error {
	const op = "evidence log consistency proof"
	old, err := tlog.OpenCheckpoint(saved, bundle.VerifierKey)
	if err != nil {
		return host.Invalid(op, "since", "the older %v", err)
	}
	cur, err := tlog.OpenCheckpoint([]byte(bundle.Checkpoint), bundle.VerifierKey)
	if err != nil {
		return host.Wrap(op, "", err)
	}
	switch {
	case old.Size > cur.Size:
		return host.Invalid(op, "since", "the older checkpoint has %d entries, more than the proof's %d", old.Size, cur.Size)
	case old.Size == cur.Size:
		if !bytes.Equal(old.Root, cur.Root) {
			return host.Invalid(op, "since", "the older checkpoint of size %d has another root than the log's: the log is not the one it signed", old.Size)
		}
		return nil
	}
	p, err := b.LogConsistency(ctx, old.Size, cur.Size)
	if err != nil {
		return err
	}
	if err := tlog.VerifyConsistency(old.Size, cur.Size, p.Hashes, old.Root, cur.Root); err != nil {
		return host.Invalid(op, "since", "the log is not consistent with the older checkpoint: %v", err)
	}
	bundle.Since = &tlog.Since{Checkpoint: string(saved), Proof: p.Hashes}
	return nil
}

// ErrLogDiverged is matched by CheckLog's finding that the log is not
// an extension of a checkpoint it signed.
var ErrLogDiverged = errors.New("the evidence log diverged from the checkpoint")

// CheckLog proves that the current log is consistent with saved, a
// checkpoint of it kept earlier (anywhere), or returns an error wrapping
// ErrLogDiverged naming where it diverges. It returns both checkpoints.
func CheckLog(ctx context.Context, b host.EvidenceLog, saved []byte) (old *tlog.Checkpoint, cur *host.LogCheckpoint, err error) {
	vkey, err := b.LogVerifierKey()
	if err != nil {
		return nil, nil, err
	}
	if old, err = tlog.OpenCheckpoint(saved, vkey); err != nil {
		return nil, nil, fmt.Errorf("%w: the checkpoint is not this log's (key %s): %v", ErrLogDiverged, vkey, err)
	}
	if cur, err = b.LogSync(ctx); err != nil && !errors.Is(err, host.ErrNotFound) {
		return nil, nil, err
	}
	var size uint64
	if cur != nil {
		size = cur.Size
	}
	if size < old.Size {
		return nil, nil, fmt.Errorf("%w: the log has %d entries, fewer than the checkpoint's %d", ErrLogDiverged, size, old.Size)
	}
	notSigned := func(why string) error {
		return fmt.Errorf("%w: the log's first %d entries are not the ones the checkpoint signed (%s)", ErrLogDiverged, old.Size, why)
	}
	p, err := b.LogConsistency(ctx, old.Size, size)
	if errors.Is(err, host.ErrNotFound) {
		return nil, nil, notSigned("the log never signed a checkpoint of that size")
	}
	if err != nil {
		return nil, nil, err
	}
	if err := tlog.VerifyConsistency(old.Size, size, p.Hashes, old.Root, cur.Root); err != nil {
		return nil, nil, notSigned(err.Error())
	}
	return old, cur, nil
}

// BundleLogProof decodes the log proof an attempt bundle carries (nil,
// nil if none) and checks that it proves that attempt's chain entry: its
// entry is the chain hash of the bundle's attempt_recorded event, at that
// event's index. It checks neither the proof nor the checkpoint
// (tlog.CheckEntry, tlog.CheckSince), nor the event against the attempt
// (VerifyBundle).
func BundleLogProof(b *host.Bundle) (*tlog.Bundle, error) {
	if b.Log == nil {
		return nil, nil
	}
	lb, err := tlog.DecodeBundle(b.Log)
	if err != nil {
		return nil, fmt.Errorf("bundle: log: %w", err)
	}
	if b.Attempt == nil {
		return nil, errors.New("bundle: no attempt")
	}
	for _, e := range b.Events {
		if e == nil || e.Type != host.EventAttemptRecorded || e.AttemptID != b.Attempt.AttemptID {
			continue
		}
		entry, err := hex.DecodeString(e.Hash)
		if err != nil || len(entry) != tlog.HashSize {
			return nil, fmt.Errorf("bundle: event %d: hash is not 32 bytes of hex", e.Seq)
		}
		leaf := lb.LeafHash
		if lb.Entry != nil {
			leaf = tlog.LeafHash(lb.Entry)
		}
		if e.Seq < 1 || lb.Index != uint64(e.Seq-1) {
			return nil, fmt.Errorf("bundle: log: the proof is of entry %d, not of attempt %s's record (event %d)", lb.Index+1, host.ShortName(b.Attempt.AttemptID), e.Seq)
		}
		if !bytes.Equal(leaf, tlog.LeafHash(entry)) {
			return nil, fmt.Errorf("bundle: log: the proven entry %d is not the chain hash of attempt %s's record: the record or the proof was changed", e.Seq, host.ShortName(b.Attempt.AttemptID))
		}
		return lb, nil
	}
	return nil, fmt.Errorf("bundle: no attempt_recorded event for attempt %s", host.ShortName(b.Attempt.AttemptID))
}
