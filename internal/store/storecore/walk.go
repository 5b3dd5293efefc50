package storecore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// ChainEntry is one entry of the chain a walk reads: a stored event, or
// an attempt (whose row is its entry; its attempt_recorded event is built
// from it).
type ChainEntry struct {
	Seq int64
	Ev  *host.Event
	At  *AttemptRow
	// Art is the artifact row an artifact_recorded event names, Msg the
	// message a message_accepted event names: nil if none is stored.
	Art *host.Artifact
	Msg *host.MessageRecord
	// Row is At, for an attempt read by ScanAttemptEntry (one allocation
	// a row).
	Row AttemptRow
}

// Hash is the entry's link in the chain.
func (e *ChainEntry) Hash() string {
	if e.Ev != nil {
		return e.Ev.Hash
	}
	return e.At.Hash
}

// AttemptEntryColumns are attempt_records' columns as ScanAttemptEntry
// reads them.
const AttemptEntryColumns = `seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash`

// ScanAttemptEntry reads an attempt's row (AttemptEntryColumns).
func ScanAttemptEntry(row Row) (*ChainEntry, error) {
	e := &ChainEntry{}
	at := &e.Row
	e.At = at
	err := row.Scan(&e.Seq, &at.AttemptID, &at.TaskID, &at.Attempt, &at.Tenant, &at.Pack, &at.StartedAt, &at.Record, &at.Prev, &at.Hash)
	at.Seq = e.Seq
	return e, err
}

// ChainWalk is what a driver hands WalkChain: its row source (the walk's
// reading stays per driver, for speed) while the checks are written once.
type ChainWalk struct {
	// Next reads the next entry in seq order, an event before an attempt
	// claiming the same place; nil at the end.
	Next func() (*ChainEntry, error)
	// Resolve, if set, fills Art or Msg of an artifact_recorded or
	// message_accepted event's entry (a driver whose Next does not join
	// them reads them here).
	Resolve func(e *ChainEntry) error
	// Values, if set, is told the values each attempt's record names.
	Values *ValueCheck
}

// WalkChain walks the chain into rep, checking that seqs are contiguous
// from 1, that each prev_hash is the previous hash and that each hash
// matches the entry (CheckChainEntry), and that the chain holds anchor
// (nil: no checkpoint). It stops at the first broken link.
func WalkChain(w ChainWalk, rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
	e, err := w.Next()
	prev, want := evidence.GenesisHash, int64(1)
	var anchorHash string
	for ; e != nil && err == nil; want++ {
		after, err := w.Next()
		if err != nil {
			return nil, err
		}
		if after != nil && after.Seq == e.Seq && e.Ev != nil && after.At != nil {
			return InsertedAttempt(after.At.AttemptID, e.Seq, e.Ev.Type), nil
		}
		if e.Seq != want {
			return &host.ChainBreak{Seq: e.Seq, Problem: host.BreakSeqGap, Detail: fmt.Sprintf("expected event %d, found %d: events were removed", want, e.Seq)}, nil
		}
		if e.At != nil {
			w.Values.Need(e.Seq, e.At.AttemptID, e.At.Record)
		} else if w.Resolve != nil && (e.Ev.Type == host.EventArtifactRecorded || e.Ev.Type == host.EventMessageAccepted) {
			if err := w.Resolve(e); err != nil {
				return nil, err
			}
		}
		if brk := CheckChainEntry(e, prev); brk != nil {
			return brk, nil
		}
		switch {
		case e.At != nil:
			rep.Attempts++
		case e.Ev.Type == host.EventArtifactRecorded:
			rep.Artifacts++
		case e.Ev.Type == host.EventMessageAccepted:
			rep.Messages++
		}
		prev = e.Hash()
		rep.Events++
		rep.Head, rep.HeadSeq = prev, e.Seq
		if anchor != nil && e.Seq == anchor.Seq {
			anchorHash = prev
		}
		e = after
	}
	if err != nil {
		return nil, err
	}
	return evidence.CheckAnchor(rep, anchorHash, anchor), nil
}

// CheckChainEntry checks one entry against the hash of the entry before
// it. CheckEventLink also breaks at a stored attempt_recorded event:
// attempts are chained by their own rows, so it is one whose attempt was
// gone when the store moved to attempt records.
func CheckChainEntry(e *ChainEntry, prev string) *host.ChainBreak {
	if e.At != nil {
		return CheckAttemptRow(e.At, prev)
	}
	if brk := CheckEventLink(e.Ev, prev); brk != nil {
		return brk
	}
	switch e.Ev.Type {
	case host.EventArtifactRecorded:
		return CheckArtifact(e.Ev, e.Art)
	case host.EventMessageAccepted:
		return CheckAcceptedMessage(e.Ev, e.Msg)
	}
	return nil
}

// VerifyChain is host.Evidence.VerifyChain: the store's checkpoint
// (checkpoint; read before the chain, so that a head committed meanwhile
// is never newer than the chain walked), then each pass in turn (the walk,
// FindUnchained, the value check) until one finds a break.
func VerifyChain(checkpoint func() (*host.ChainHead, *host.ChainBreak), passes ...func(*host.ChainReport, *host.ChainHead) (*host.ChainBreak, error)) (*host.ChainReport, error) {
	rep := &host.ChainReport{Head: evidence.GenesisHash}
	anchor, brk := checkpoint()
	rep.Checkpoint = anchor
	for _, pass := range passes {
		if brk != nil {
			break
		}
		var err error
		if brk, err = pass(rep, anchor); err != nil {
			return nil, host.Wrap("verify chain", "", err)
		}
	}
	rep.Broken = brk
	rep.OK = brk == nil
	return rep, nil
}

// FindUnchained reports the first attempt no place in the chain is (one
// carried over from before attempt records without its event), or
// artifact or message whose row does not point at its own recording event
// (inserted behind the chain's back).
func FindUnchained(ctx context.Context, q Querier, d *Dialect) (*host.ChainBreak, error) {
	var id string
	unplaced := `seq <= 0`
	if d.Pending {
		unplaced = `seq = 0` // a negative one is pending
	}
	err := q.QueryRow(ctx, `SELECT attempt_id FROM attempt_records WHERE `+unplaced+` LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{AttemptID: id, Problem: host.BreakAttemptUnchain, Detail: fmt.Sprintf("attempt %s is stored but no attempt_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, ErrNoRows) {
		return nil, err
	}
	err = q.QueryRow(ctx, `SELECT a.artifact_id FROM artifacts a
		LEFT JOIN runtime_events e ON e.seq = a.event_seq AND e.type = 'artifact_recorded'
		WHERE e.seq IS NULL OR `+d.DataField("e.data", "artifact_id")+` IS DISTINCT FROM a.artifact_id LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{ArtifactID: id, Problem: host.BreakArtifactUnchain, Detail: fmt.Sprintf("artifact %s is stored but no artifact_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, ErrNoRows) {
		return nil, err
	}
	err = q.QueryRow(ctx, `SELECT m.message_id FROM messages m
		LEFT JOIN runtime_events e ON e.seq = m.event_seq AND e.type = 'message_accepted'
		WHERE e.seq IS NULL OR `+d.DataField("e.data", "message_id")+` IS DISTINCT FROM m.message_id
			OR `+d.DataField("e.data", "tenant")+` IS DISTINCT FROM m.tenant LIMIT 1`).Scan(&id)
	if errors.Is(err, ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return UnchainedMessage(id), nil
}

// Verifier is what host.Evidence.VerifyAttempt and EachVerifiedAttempt
// read through: the store's pool, its checkpoint and its values.
type Verifier struct {
	Q          Querier
	Dialect    *Dialect
	Checkpoint func() (*host.ChainHead, *host.ChainBreak)
	Read       ValueReader
}

// VerifyAttempt checks the attempt's row against its link, and the entry
// after it against the attempt's link (so that a row rewritten with a
// link to match is found too), then its values out of line.
func (v Verifier) VerifyAttempt(ctx context.Context, attemptID string) error {
	const op = "verify attempt"
	e, err := ScanAttemptEntry(v.Q.QueryRow(ctx, `SELECT `+AttemptEntryColumns+` FROM attempt_records WHERE attempt_id = $1`, attemptID))
	if errors.Is(err, ErrNoRows) {
		return host.Wrap(op, attemptID, host.ErrNotFound)
	}
	if err != nil {
		return host.Wrap(op, attemptID, err)
	}
	if e.Seq < 0 && v.Dialect.Pending {
		return host.Errorf(op, attemptID, host.ErrNotFound, "attempt %s is recorded but not linked into the chain yet: try again in a moment", attemptID)
	}
	if brk := UnplacedAttempt(e.At); brk != nil {
		return brk
	}
	around := &LinksAround{Seq: e.Seq}
	// The links of both tables at seq-1, seq and seq+1, in one statement.
	if err := v.links(ctx, `BETWEEN $1 - 1 AND $1 + 1`, e.Seq, around.Add); err != nil {
		return host.Wrap(op, attemptID, err)
	}
	anchor, _ := v.Checkpoint()
	if brk := CheckAttemptPlace(e.At, around, anchor); brk != nil {
		return brk
	}
	return CheckRowValues(ctx, v.Read, e.At)
}

// links reads the links of both tables at the seqs cond names (with arg
// as $1), handing each to add, events before attempts.
func (v Verifier) links(ctx context.Context, cond string, arg any, add func(int64, ChainLink)) error {
	rows, err := v.Q.Query(ctx, `SELECT seq, type, prev_hash, hash FROM runtime_events WHERE seq `+cond+`
		UNION ALL SELECT seq, '', prev_hash, hash FROM attempt_records WHERE seq `+cond, arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var at int64
		var l ChainLink
		if err := rows.Scan(&at, &l.Kind, &l.Prev, &l.Hash); err != nil {
			return err
		}
		add(at, l)
	}
	return rows.Err()
}

// VerifyPageSize is how many attempts EachVerifiedAttempt reads at once.
var VerifyPageSize = 256

// EachVerifiedAttempt is host.Evidence.EachVerifiedAttempt: a page of
// attempts' rows per query and the links around their places in one
// more, each attempt's place then checked as VerifyAttempt does, against
// the checkpoint read once for the pass (VerifyPage).
func (v Verifier) EachVerifiedAttempt(ctx context.Context, f host.AttemptFilter, fn func(*host.Attempt, error) error) error {
	const op = "verify attempts"
	anchor, _ := v.Checkpoint()
	for {
		size := VerifyPageSize
		var a Args
		where := AttemptWhere(f, &a, v.Dialect)
		rows, err := v.Q.Query(ctx, `SELECT `+AttemptEntryColumns+` FROM attempt_records`+where+` ORDER BY seq DESC`+LimitClause(size), a...)
		if err != nil {
			return host.Wrap(op, "", err)
		}
		var page []*AttemptRow
		for rows.Next() {
			e, err := ScanAttemptEntry(rows)
			if err != nil {
				rows.Close()
				return host.Wrap(op, "", err)
			}
			page = append(page, e.At)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return host.Wrap(op, "", err)
		}
		links := NewPageLinks(page)
		in, arg, err := v.Dialect.InList(links.Seqs())
		if err != nil {
			return host.Wrap(op, "", err)
		}
		if err := v.links(ctx, in, arg, links.Add); err != nil {
			return host.Wrap(op, "", err)
		}
		if err := VerifyPage(ctx, page, links, anchor, v.Read, fn); err != nil {
			return err
		}
		if len(page) < size {
			return nil
		}
		f.BeforeSeq = page[len(page)-1].Seq
	}
}

// LimitClause is " LIMIT n", n written out.
func LimitClause(n int) string { return " LIMIT " + strconv.Itoa(n) }
