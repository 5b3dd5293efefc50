package storecore

import (
	"context"
	"fmt"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// ValueReader reads stored attempt values (the evidence_values table of
// either store) by key; a key with no row is absent from the map.
type ValueReader func(ctx context.Context, keys []string) (map[string][]byte, error)

// DecodeAttempt decodes an attempt's record (read at seq) and puts the
// values it keeps out of line in place, each checked against its digest:
// a missing or changed value is an error matching host.ErrTampered that
// names the attempt.
func DecodeAttempt(ctx context.Context, read ValueReader, seq int64, rec []byte) (*host.Attempt, error) {
	a, _, refs, err := evidence.DecodeRecordRefs(rec)
	if err != nil {
		return nil, fmt.Errorf("attempt at seq %d: %w", seq, err)
	}
	a.EventSeq = seq
	return a, FillValues(ctx, read, a, refs)
}

// FillValues puts refs' values in a (see DecodeAttempt).
func FillValues(ctx context.Context, read ValueReader, a *host.Attempt, refs []evidence.Ref) error {
	if len(refs) == 0 {
		return nil
	}
	keys := make([]string, len(refs))
	for i, r := range refs {
		keys[i] = r.Key()
	}
	vals, err := read(ctx, keys)
	if err != nil {
		return fmt.Errorf("attempt %s: read its values: %w", a.AttemptID, err)
	}
	for _, r := range refs {
		if brk := valueBreak(a, a.EventSeq, a.AttemptID, r, vals); brk != nil {
			return brk
		}
	}
	return nil
}

// valueBreak puts r's value in a if it is stored and matches; otherwise
// it is the break that names the attempt. a nil: only checked.
func valueBreak(a *host.Attempt, seq int64, attemptID string, r evidence.Ref, vals map[string][]byte) *host.ChainBreak {
	v, ok := vals[r.Key()]
	if !ok {
		return &host.ChainBreak{Seq: seq, Type: host.EventAttemptRecorded, AttemptID: attemptID, Problem: host.BreakAttemptHash,
			Detail: fmt.Sprintf("attempt %s, recorded at event %d: its %s (value %.12s…) is missing from the store", attemptID, seq, r.Name(), r.Key())}
	}
	if a == nil {
		a = &host.Attempt{}
	}
	if err := evidence.FillValue(a, r, v); err != nil {
		return &host.ChainBreak{Seq: seq, Type: host.EventAttemptRecorded, AttemptID: attemptID, Problem: host.BreakAttemptHash,
			Detail: fmt.Sprintf("attempt %s, recorded at event %d, was changed after it was recorded: %v", attemptID, seq, err)}
	}
	return nil
}

// ValueCheck is the value pass of `evidence verify`, apart from the chain
// walk: the walk hashes each record (which commits to its values'
// digests), this checks that each value a record names is stored and
// still has that digest. Need is called for every attempt row in seq
// order, then Check for the stored values; each distinct value is hashed
// once. Values are only ever added, so values read after the records
// include every value those records name.
type ValueCheck struct {
	need  map[string]valueUse // key → its first use
	order []string            // keys by first use
}

type valueUse struct {
	seq       int64
	attemptID string
	ref       evidence.Ref
	checked   bool
	brk       *host.ChainBreak
}

// Need notes the values the record of attemptID (at seq) keeps out of
// line. A record that does not decode is the chain walk's to report.
func (c *ValueCheck) Need(seq int64, attemptID string, rec []byte) {
	if c == nil || len(rec) == 0 || rec[0] != evidence.RecordV3 {
		return
	}
	_, _, refs, err := evidence.DecodeRecordRefs(rec)
	if err != nil {
		return
	}
	if c.need == nil {
		c.need = map[string]valueUse{}
	}
	for _, r := range refs {
		k := r.Key()
		if _, ok := c.need[k]; !ok {
			c.need[k] = valueUse{seq: seq, attemptID: attemptID, ref: r}
			c.order = append(c.order, k)
		}
	}
}

// Keys are the keys of the values needed, in order of first use.
func (c *ValueCheck) Keys() []string { return c.order }

// Check checks one stored value against the digest the records name it by.
func (c *ValueCheck) Check(key string, v []byte) {
	u, ok := c.need[key]
	if !ok || u.checked {
		return // no record names it (yet)
	}
	u.checked, u.brk = true, valueBreak(nil, u.seq, u.attemptID, u.ref, map[string][]byte{key: v})
	c.need[key] = u
}

// Break is the break of the first attempt (in seq order) that names a
// value which did not match or which Check was not given; nil if none.
func (c *ValueCheck) Break() *host.ChainBreak {
	var first *host.ChainBreak
	for _, k := range c.order {
		u := c.need[k]
		brk := u.brk
		if !u.checked {
			brk = valueBreak(nil, u.seq, u.attemptID, u.ref, nil)
		}
		if brk != nil && (first == nil || brk.Seq < first.Seq) {
			first = brk
		}
	}
	return first
}

// CheckRowValues checks the values an attempt's row names out of line
// against their digests (VerifyAttempt, after the row's place is checked):
// a missing or changed one is the break that names the attempt. A record
// that does not decode is CheckAttemptRow's to report.
func CheckRowValues(ctx context.Context, read ValueReader, r *AttemptRow) error {
	if len(r.Record) == 0 || r.Record[0] != evidence.RecordV3 {
		return nil
	}
	a, _, refs, err := evidence.DecodeRecordRefs(r.Record)
	if err != nil {
		return nil
	}
	a.AttemptID, a.EventSeq = r.AttemptID, r.Seq
	return FillValues(ctx, read, a, refs)
}
