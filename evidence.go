package packrun

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
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
