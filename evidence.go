package packrun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// MaxBundleBytes bounds an evidence bundle VerifyBundle reads.
const MaxBundleBytes = evidence.MaxBundleBytes

// ErrInvalidBundle is matched by every refusal of an evidence bundle.
var ErrInvalidBundle = errors.New("invalid evidence bundle")

// VerifyBundle decodes an exported attempt bundle (`packrun evidence
// export`) from untrusted bytes and verifies it on its own: the attempt's
// content hash, every event's hash, the attempt_recorded event, every
// artifact's digest, and the seal's signature if it has one (whether the
// sealing host is trusted is CheckBundleSeal's question).
func VerifyBundle(data []byte) (*host.Bundle, error) {
	b, err := evidence.DecodeBundle(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	if err := evidence.VerifyBundle(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	if b.Seal != nil {
		// The signature on its own; whose key it is, CheckBundleSeal.
		if err := CheckBundleSeal(b, nil, SealPolicy{AnyHostKey: true}); err != nil {
			return nil, err
		}
	}
	// The log proof, when the bundle carries one, on its own: it proves
	// the attempt's entry against the checkpoint it carries, signed by
	// the key it names (whether that is the log's key, CheckBundleLog).
	if lb, err := evidence.BundleLogProof(b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	} else if lb != nil {
		if lb.VerifierKey == "" {
			return nil, fmt.Errorf("%w: bundle: log: names no verifier key", ErrInvalidBundle)
		}
		if _, err := tlog.CheckEntry(lb, lb.VerifierKey); err != nil {
			return nil, fmt.Errorf("%w: bundle: log: %v", ErrInvalidBundle, err)
		}
	}
	return b, nil
}

// CheckBundleLog checks, offline and with nothing else, the log proof of
// an attempt bundle VerifyBundle accepted, as an auditor does: saved is a
// checkpoint the auditor kept from the log; vkey the log's verifier key,
// or "" to trust the key the bundle names only if it opens saved
// (tlog.CheckSince). It returns the proof, the bundle's checkpoint and
// the saved one.
func CheckBundleLog(b *host.Bundle, saved []byte, vkey string) (*tlog.Bundle, *tlog.Checkpoint, *tlog.Checkpoint, error) {
	lb, err := evidence.BundleLogProof(b)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	if lb == nil {
		return nil, nil, nil, fmt.Errorf("%w: bundle: carries no log proof (exported by a packrun from before the log): export it again", ErrInvalidBundle)
	}
	cur, old, err := tlog.CheckSince(lb, saved, vkey)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", ErrInvalidBundle, err)
	}
	return lb, cur, old, nil
}

// ExportBundle is the exported bundle of an attempt (sealed by the host
// key) with its log proof: the inclusion proof of its chain entry and the
// signed checkpoint proven against and, if since is not nil (an older
// signed checkpoint of this log, an auditor's), the consistency proof
// from it.
func (h *Host) ExportBundle(ctx context.Context, attemptID string, since []byte) (*host.Bundle, error) {
	b, err := h.store.ExportAttempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	lb, err := h.ProveEntry(ctx, attemptID, 0)
	if err != nil {
		return nil, err
	}
	if since != nil {
		if err := h.ProveSince(ctx, lb, since); err != nil {
			return nil, err
		}
	}
	if b.Log, err = lb.Encode(); err != nil {
		return nil, err
	}
	return b, nil
}

// BundleMatches compares a verified bundle with this store's record of its
// attempt: false if the store does not hold the attempt, an error wrapping
// ErrInvalidBundle if it holds something else.
func (h *Host) BundleMatches(ctx context.Context, b *host.Bundle) (bool, error) {
	st := h.store
	rec, err := st.Attempt(ctx, b.Attempt.AttemptID)
	if errors.Is(err, host.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if rec.ContentHash != b.Attempt.ContentHash {
		return false, fmt.Errorf("%w: attempt %s differs from this store's record of it (content hash %s, recorded %s)", ErrInvalidBundle, rec.AttemptID, host.ShortName(b.Attempt.ContentHash), rec.ContentHash)
	}
	for _, e := range b.Events {
		got, err := st.Events(ctx, host.EventFilter{AfterSeq: e.Seq - 1, Limit: 1})
		if err != nil {
			return false, err
		}
		if len(got) == 0 || got[0].Seq != e.Seq || got[0].Hash != e.Hash {
			return false, fmt.Errorf("%w: event %d (%s) differs from this store's event %d", ErrInvalidBundle, e.Seq, host.ShortName(e.Type), e.Seq)
		}
	}
	return true, nil
}

// VerifyChain walks the evidence hash chain (host.Evidence.VerifyChain,
// which also checks the head against the store's signed checkpoint) and,
// if pin is not nil, checks that the chain still holds the head an
// operator recorded elsewhere: an event at pin.Seq with pin.Hash. A broken
// chain is a report (ChainReport.Broken), not an error.
func (h *Host) VerifyChain(ctx context.Context, pin *host.ChainHead) (*host.ChainReport, error) {
	rep, err := h.store.VerifyChain(ctx)
	if err != nil || !rep.OK || pin == nil {
		return rep, err
	}
	var hashAt string
	if pin.Seq <= rep.HeadSeq {
		evs, err := h.store.Events(ctx, host.EventFilter{AfterSeq: pin.Seq - 1, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(evs) == 1 && evs[0].Seq == pin.Seq {
			hashAt = evs[0].Hash
		}
	}
	if brk := evidence.CheckHead(rep, hashAt, *pin, "the pinned head names"); brk != nil {
		rep.OK, rep.Broken = false, brk
	}
	return rep, nil
}

// ParseHead parses a pinned head, "SEQ:HASH" (as `packrun evidence verify`
// prints it).
func ParseHead(s string) (*host.ChainHead, error) {
	seq, hash, ok := strings.Cut(s, ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if !ok || err != nil || n < 1 || len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		return nil, usageErr("head %q is not SEQ:HASH (an event's seq and its 64 hex digit hash, as 'packrun evidence verify' prints them)", s)
	}
	return &host.ChainHead{Seq: n, Hash: hash}, nil
}
