package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// VerifyChain implements host.Evidence. It walks the events in seq order,
// checking that seqs are contiguous from 1, that each prev_hash is the
// previous hash and that each hash matches the event's fields; at each
// attempt_recorded (artifact_recorded) event it re-hashes the stored
// attempt (re-reads the artifact record) and compares it with what the
// event chained. Finally it looks for attempts and artifacts that no event
// covers. It stops at the first broken link.
func (s *Store) VerifyChain(ctx context.Context) (*host.ChainReport, error) {
	const op = "verify chain"
	rep := &host.ChainReport{Head: evidence.GenesisHash}
	// The checkpoint is read before the chain, so that a head another
	// process commits meanwhile is never newer than the chain walked.
	cp, brk := s.checkCheckpoint()
	var anchor *host.ChainHead
	if cp != nil {
		t, _ := time.Parse(time.RFC3339Nano, cp.Time)
		anchor = &host.ChainHead{Seq: cp.Seq, Hash: cp.Hash, Time: t}
		rep.Checkpoint = anchor
	}
	if brk == nil {
		var err error
		if brk, err = s.walkChain(ctx, rep, anchor); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	if brk == nil {
		var err error
		if brk, err = s.findUnchained(ctx); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	rep.Broken = brk
	rep.OK = brk == nil
	return rep, nil
}

// CheckHead reports whether the chain holds head: an event at head.Seq with
// head.Hash. A chain that ends before it, or differs there, lost or
// rewrote its newest events. what names the anchor in the message.
func CheckHead(rep *host.ChainReport, hashAt string, head host.ChainHead, what string) *host.ChainBreak {
	switch {
	case rep.HeadSeq < head.Seq:
		return &host.ChainBreak{Seq: head.Seq, Problem: host.BreakHeadRewound,
			Detail: fmt.Sprintf("the chain ends at event %d, but %s event %d (%.12s…): events after %d were removed", rep.HeadSeq, what, head.Seq, head.Hash, rep.HeadSeq)}
	case hashAt != head.Hash:
		return &host.ChainBreak{Seq: head.Seq, Problem: host.BreakHeadRewound,
			Detail: fmt.Sprintf("event %d hashes to %.12s…, but %s it as %.12s…: the chain was rewritten", head.Seq, hashAt, what, head.Hash)}
	}
	return nil
}

func (s *Store) walkChain(ctx context.Context, rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+eventColumns+` FROM runtime_events ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	prev, want := evidence.GenesisHash, int64(1)
	var anchorHash string
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, err
		}
		brk := func(problem, format string, args ...any) *host.ChainBreak {
			return &host.ChainBreak{Seq: e.Seq, Type: e.Type, AttemptID: e.AttemptID, Problem: problem, Detail: fmt.Sprintf(format, args...)}
		}
		switch {
		case e.Seq != want:
			return brk(host.BreakSeqGap, "expected event %d, found %d: events were removed", want, e.Seq), nil
		case e.PrevHash != prev:
			return brk(host.BreakPrevHash, "prev_hash %.12s… is not the hash of event %d (%.12s…): the chain was rewritten", e.PrevHash, e.Seq-1, prev), nil
		case evidence.HashEvent(e) != e.Hash:
			return brk(host.BreakEventHash, "event %d (%s) was changed after it was appended: its fields no longer match its hash", e.Seq, e.Type), nil
		}
		switch e.Type {
		case host.EventAttemptRecorded:
			if b, err := s.checkAttempt(ctx, e); b != nil || err != nil {
				return b, err
			}
			rep.Attempts++
		case host.EventArtifactRecorded:
			if b, err := s.checkArtifact(ctx, e); b != nil || err != nil {
				return b, err
			}
			rep.Artifacts++
		}
		prev, want = e.Hash, want+1
		rep.Events++
		rep.Head, rep.HeadSeq = e.Hash, e.Seq
		if anchor != nil && e.Seq == anchor.Seq {
			anchorHash = e.Hash
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if anchor != nil {
		return CheckHead(rep, anchorHash, *anchor, "the host's signed checkpoint of "+anchor.Time.Format(time.RFC3339)+" anchored"), nil
	}
	return nil, nil
}

// VerifyAttempt implements host.Evidence.
func (s *Store) VerifyAttempt(ctx context.Context, attemptID string) error {
	const op = "verify attempt"
	var seq int64
	err := s.db.QueryRowContext(ctx, `SELECT event_seq FROM task_attempts WHERE attempt_id = ?`, attemptID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return host.Wrap(op, attemptID, host.ErrNotFound)
	}
	if err != nil {
		return host.Wrap(op, attemptID, err)
	}
	unchained := &host.ChainBreak{AttemptID: attemptID, Problem: host.BreakAttemptUnchain,
		Detail: fmt.Sprintf("attempt %s is stored but no attempt_recorded event chains it", attemptID)}
	e, err := scanEvent(s.db.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM runtime_events WHERE seq = ?`, seq))
	if errors.Is(err, sql.ErrNoRows) {
		return unchained
	}
	if err != nil {
		return host.Wrap(op, attemptID, err)
	}
	if e.Type != host.EventAttemptRecorded || e.AttemptID != attemptID {
		return unchained
	}
	if evidence.HashEvent(e) != e.Hash {
		return &host.ChainBreak{Seq: e.Seq, Type: e.Type, AttemptID: attemptID, Problem: host.BreakEventHash,
			Detail: fmt.Sprintf("event %d (%s) was changed after it was appended: its fields no longer match its hash", e.Seq, e.Type)}
	}
	brk, err := s.checkAttempt(ctx, e)
	if err != nil {
		return host.Wrap(op, attemptID, err)
	}
	if brk != nil {
		return brk
	}
	return nil
}

func (s *Store) checkAttempt(ctx context.Context, e *host.Event) (*host.ChainBreak, error) {
	var d struct {
		ContentHash string `json:"content_hash"`
	}
	json.Unmarshal(e.Data, &d)
	brk := &host.ChainBreak{Seq: e.Seq, Type: e.Type, AttemptID: e.AttemptID}
	a, err := scanAttempt(s.db.QueryRowContext(ctx, `SELECT `+attemptColumns+` FROM task_attempts WHERE attempt_id = ?`, e.AttemptID))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		brk.Problem, brk.Detail = host.BreakAttemptMissing, fmt.Sprintf("attempt %s, recorded at event %d, is no longer stored", e.AttemptID, e.Seq)
		return brk, nil
	case err != nil && a == nil:
		return nil, err
	case err != nil:
		brk.Problem, brk.Detail = host.BreakAttemptHash, fmt.Sprintf("attempt %s, recorded at event %d, was changed: a column is no longer readable (%v)", e.AttemptID, e.Seq, err)
		return brk, nil
	}
	if got := evidence.HashAttempt(a); got != d.ContentHash || a.ContentHash != d.ContentHash || a.EventSeq != e.Seq {
		brk.Problem = host.BreakAttemptHash
		brk.Detail = fmt.Sprintf("attempt %s was changed after it was recorded: its content hashes to %.12s…, event %d chained %.12s…", e.AttemptID, got, e.Seq, d.ContentHash)
		return brk, nil
	}
	return nil, nil
}

func (s *Store) checkArtifact(ctx context.Context, e *host.Event) (*host.ChainBreak, error) {
	var d struct {
		ArtifactID   string `json:"artifact_id"`
		SHA256       string `json:"sha256"`
		Size         int64  `json:"size"`
		Role         string `json:"role"`
		RelativePath string `json:"relative_path"`
	}
	json.Unmarshal(e.Data, &d)
	brk := &host.ChainBreak{Seq: e.Seq, Type: e.Type, AttemptID: e.AttemptID, ArtifactID: d.ArtifactID}
	a, err := scanArtifact(s.db.QueryRowContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE artifact_id = ?`, d.ArtifactID))
	if errors.Is(err, sql.ErrNoRows) {
		brk.Problem, brk.Detail = host.BreakArtifactMissing, fmt.Sprintf("artifact %s, recorded at event %d, is no longer stored", d.ArtifactID, e.Seq)
		return brk, nil
	}
	if err != nil {
		return nil, err
	}
	if a.SHA256 != d.SHA256 || a.Size != d.Size || string(a.Role) != d.Role || a.RelativePath != d.RelativePath || a.TaskID != e.TaskID || a.AttemptID != e.AttemptID {
		brk.Problem, brk.Detail = host.BreakArtifactHash, fmt.Sprintf("artifact %s no longer matches what event %d recorded", d.ArtifactID, e.Seq)
		return brk, nil
	}
	return nil, nil
}

// findUnchained reports the first attempt or artifact whose row does not
// point at its own recording event (inserted behind the chain's back).
func (s *Store) findUnchained(ctx context.Context) (*host.ChainBreak, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT a.attempt_id FROM task_attempts a
		LEFT JOIN runtime_events e ON e.seq = a.event_seq AND e.type = 'attempt_recorded' AND e.attempt_id = a.attempt_id
		WHERE e.seq IS NULL LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{AttemptID: id, Problem: host.BreakAttemptUnchain, Detail: fmt.Sprintf("attempt %s is stored but no attempt_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	err = s.db.QueryRowContext(ctx, `SELECT a.artifact_id FROM artifacts a
		LEFT JOIN runtime_events e ON e.seq = a.event_seq AND e.type = 'artifact_recorded'
		WHERE e.seq IS NULL OR json_extract(e.data, '$.artifact_id') IS NOT a.artifact_id LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{ArtifactID: id, Problem: host.BreakArtifactUnchain, Detail: fmt.Sprintf("artifact %s is stored but no artifact_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return nil, nil
}
