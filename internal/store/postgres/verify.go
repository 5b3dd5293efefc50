package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

// chainEntry is one entry of the chain: a stored event, or an attempt
// (whose row is its entry; its attempt_recorded event is built from it).
type chainEntry struct {
	seq int64
	ev  *host.Event
	at  *storecore.AttemptRow
	// art is the artifact row an artifact_recorded event names, nil if
	// none is stored.
	art *host.Artifact
	// msg is the message a message_accepted event names, nil if none is
	// stored (messages.go).
	msg *host.MessageRecord
}

func (e *chainEntry) hash() string {
	if e.ev != nil {
		return e.ev.Hash
	}
	return e.at.Hash
}

const attemptEntryColumns = `seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash`

func scanAttemptEntry(row pgx.Row) (*chainEntry, error) {
	var at storecore.AttemptRow
	e := &chainEntry{at: &at}
	err := row.Scan(&at.Seq, &at.AttemptID, &at.TaskID, &at.Attempt, &at.Tenant, &at.Pack, &at.StartedAt, &at.Record, &at.Prev, &at.Hash)
	e.seq = at.Seq
	return e, err
}

// chainQuery reads both tables' entries in one pass, in seq order (an
// event before an attempt claiming the same place), each
// artifact_recorded event with the artifact row it names, if any: the
// walk then needs no other query while it streams.
const chainQuery = `SELECT e.seq, true, e.time, e.type, e.task_id, e.attempt_id, e.data, e.prev_hash, e.hash, 0::bigint, '', '', '', NULL::bytea,
		ar.artifact_id IS NOT NULL, coalesce(ar.task_id, ''), coalesce(ar.attempt_id, ''), coalesce(ar.role, ''), coalesce(ar.relative_path, ''),
		coalesce(ar.sha256, ''), coalesce(ar.size, 0), ` + messageJoinColumns + `
	FROM runtime_events e LEFT JOIN artifacts ar
		ON ar.artifact_id = CASE WHEN e.type = 'artifact_recorded' THEN e.data::jsonb ->> 'artifact_id' END` + messageJoin + `
	UNION ALL SELECT seq, false, '', '', task_id, attempt_id, '', prev_hash, hash, attempt, tenant, pack, started_at, record,
		false, '', '', '', '', '', 0, false, '', '', '', 0
	FROM attempt_records WHERE seq > 0
	ORDER BY 1, 2 DESC`

func scanChainEntry(rows pgx.Rows) (*chainEntry, error) {
	var seq, attempt int64
	var isEvent, hasArt bool
	var t, typ, taskID, attemptID, data, prev, hash, tenant, pack, started string
	var rec []byte
	var art host.Artifact
	var role string
	var msg joinedMessage
	if err := rows.Scan(append([]any{&seq, &isEvent, &t, &typ, &taskID, &attemptID, &data, &prev, &hash, &attempt, &tenant, &pack, &started, &rec,
		&hasArt, &art.TaskID, &art.AttemptID, &role, &art.RelativePath, &art.SHA256, &art.Size}, msg.dest()...)...); err != nil {
		return nil, err
	}
	if isEvent {
		e := &host.Event{Seq: seq, Time: parseTS(t), Type: typ, TaskID: taskID, AttemptID: attemptID, PrevHash: prev, Hash: hash}
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		ce := &chainEntry{seq: seq, ev: e, msg: msg.record()}
		if hasArt {
			art.Role = host.ArtifactRole(role)
			ce.art = &art
		}
		return ce, nil
	}
	return &chainEntry{seq: seq, at: &storecore.AttemptRow{Seq: seq, AttemptID: attemptID, TaskID: taskID, Tenant: tenant, Pack: pack, StartedAt: started,
		Attempt: attempt, Record: rec, Prev: prev, Hash: hash}}, nil
}

// VerifyChain implements host.Evidence, with internal/store/sqlite's checks: it
// walks the entries in seq order (one REPEATABLE READ snapshot, so
// appends committed meanwhile by other nodes are not half seen), checking
// that seqs are contiguous from 1, that each prev_hash is the previous
// hash and that each hash matches the entry; it re-hashes each attempt's
// record and re-reads each artifact's. Finally it looks for attempts and
// artifacts that no entry covers. It stops at the first broken link.
// Each message_accepted event's message is re-hashed (messages.go).
// The chain must hold this node's signed head checkpoint (checkpoint.go):
// a chain that ends before it, or whose entry there has another hash, is
// broken (host.BreakHeadRewound), and so is a checkpoint not signed by
// this node's host key (host.BreakCheckpoint).
func (s *Store) VerifyChain(ctx context.Context) (*host.ChainReport, error) {
	const op = "verify chain"
	rep := &host.ChainReport{Head: evidence.GenesisHash}
	// The checkpoint is read before the snapshot is taken, so that a head
	// this node commits meanwhile is never newer than the chain walked.
	anchor, brk := s.checkAnchor()
	rep.Checkpoint = anchor
	if brk != nil {
		rep.Broken = brk
		return rep, nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer tx.Rollback(ctx)
	brk, err = walkChain(ctx, tx, rep, anchor)
	if err == nil && brk == nil {
		brk, err = findUnchained(ctx, tx)
	}
	if err == nil && brk == nil {
		brk, err = checkValues(ctx, tx)
	}
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	rep.Broken = brk
	rep.OK = brk == nil
	return rep, nil
}

// walkChain walks the chain into rep and checks that it holds anchor (nil:
// no checkpoint).
func walkChain(ctx context.Context, tx pgx.Tx, rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
	rows, err := tx.Query(ctx, chainQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	next := func() (*chainEntry, error) {
		if !rows.Next() {
			return nil, rows.Err()
		}
		return scanChainEntry(rows)
	}
	e, err := next()
	prev, want := evidence.GenesisHash, int64(1)
	var anchorHash string
	for ; e != nil && err == nil; want++ {
		after, err := next()
		if err != nil {
			return nil, err
		}
		if after != nil && after.seq == e.seq && e.ev != nil && after.at != nil {
			return storecore.InsertedAttempt(after.at.AttemptID, e.seq, e.ev.Type), nil
		}
		if e.seq != want {
			return &host.ChainBreak{Seq: e.seq, Problem: host.BreakSeqGap, Detail: fmt.Sprintf("expected event %d, found %d: events were removed", want, e.seq)}, nil
		}
		if brk, err := checkEntry(e, prev); brk != nil || err != nil {
			return brk, err
		}
		switch {
		case e.at != nil:
			rep.Attempts++
		case e.ev.Type == host.EventArtifactRecorded:
			rep.Artifacts++
		case e.ev.Type == host.EventMessageAccepted:
			rep.Messages++
		}
		prev = e.hash()
		rep.Events++
		rep.Head, rep.HeadSeq = prev, e.seq
		if anchor != nil && e.seq == anchor.Seq {
			anchorHash = prev
		}
		e = after
	}
	if err != nil {
		return nil, err
	}
	return evidence.CheckAnchor(rep, anchorHash, anchor), nil
}

// checkEntry checks one entry against the hash of the entry before it.
func checkEntry(e *chainEntry, prev string) (*host.ChainBreak, error) {
	if e.at != nil {
		return storecore.CheckAttemptRow(e.at, prev), nil
	}
	if brk := storecore.CheckEventLink(e.ev, prev); brk != nil {
		return brk, nil
	}
	switch e.ev.Type {
	case host.EventArtifactRecorded:
		return storecore.CheckArtifact(e.ev, e.art), nil
	case host.EventMessageAccepted:
		return storecore.CheckAcceptedMessage(e.ev, e.msg), nil
	}
	return nil, nil
}

// findUnchained reports the first attempt no place in the chain is, or
// artifact whose row does not point at its own recording event.
func findUnchained(ctx context.Context, q pgx.Tx) (*host.ChainBreak, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT attempt_id FROM attempt_records WHERE seq <= 0 LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{AttemptID: id, Problem: host.BreakAttemptUnchain, Detail: fmt.Sprintf("attempt %s is stored but no attempt_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	err = q.QueryRow(ctx, `SELECT a.artifact_id FROM artifacts a
		LEFT JOIN runtime_events e ON e.seq = a.event_seq AND e.type = 'artifact_recorded'
		WHERE e.seq IS NULL OR (e.data::jsonb ->> 'artifact_id') IS DISTINCT FROM a.artifact_id LIMIT 1`).Scan(&id)
	if err == nil {
		return &host.ChainBreak{ArtifactID: id, Problem: host.BreakArtifactUnchain, Detail: fmt.Sprintf("artifact %s is stored but no artifact_recorded event chains it", id)}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	return findUnchainedMessage(ctx, q)
}

// VerifyAttempt implements host.Evidence: it checks the attempt's row
// against its link, and the entry after it against the attempt's link
// (so that a row rewritten with a link to match is found too).
func (s *Store) VerifyAttempt(ctx context.Context, attemptID string) error {
	const op = "verify attempt"
	e, err := scanAttemptEntry(s.pool.QueryRow(ctx, `SELECT `+attemptEntryColumns+` FROM attempt_records WHERE attempt_id = $1`, attemptID))
	if errors.Is(err, pgx.ErrNoRows) {
		return host.Wrap(op, attemptID, host.ErrNotFound)
	}
	if err != nil {
		return host.Wrap(op, attemptID, err)
	}
	if err := s.verifyAttemptEntry(ctx, e); err != nil {
		return err
	}
	return storecore.CheckRowValues(ctx, s.readValues, e.at)
}

// verifyAttemptEntry is VerifyAttempt of an attempt's row, read.
func (s *Store) verifyAttemptEntry(ctx context.Context, e *chainEntry) error {
	if brk := storecore.UnplacedAttempt(e.at); brk != nil {
		return brk
	}
	around, err := s.linksAround(ctx, e.seq)
	if err != nil {
		return host.Wrap("verify attempt", e.at.AttemptID, err)
	}
	anchor, _ := s.checkAnchor()
	if brk := storecore.CheckAttemptPlace(e.at, around, anchor); brk != nil {
		return brk
	}
	return nil
}

// linksAround reads, in one statement, the links of both tables at seq-1,
// seq and seq+1.
func (s *Store) linksAround(ctx context.Context, seq int64) (*storecore.LinksAround, error) {
	rows, err := s.pool.Query(ctx, `SELECT seq, type, prev_hash, hash FROM runtime_events WHERE seq BETWEEN $1 - 1 AND $1 + 1
		UNION ALL SELECT seq, '', prev_hash, hash FROM attempt_records WHERE seq BETWEEN $1 - 1 AND $1 + 1`, seq)
	if err != nil {
		return nil, err
	}
	ls := &storecore.LinksAround{Seq: seq}
	var at int64
	var l storecore.ChainLink
	_, err = pgx.ForEachRow(rows, []any{&at, &l.Kind, &l.Prev, &l.Hash}, func() error {
		ls.Add(at, l)
		return nil
	})
	return ls, err
}

// verifyPage is how many attempts EachVerifiedAttempt reads at once.
const verifyPage = 256

// EachVerifiedAttempt implements host.Evidence: a page of attempts' rows
// per query and the links around their places in one more, each
// attempt's place then checked as VerifyAttempt does, against the
// checkpoint read once for the pass (storecore.VerifyPage).
func (s *Store) EachVerifiedAttempt(ctx context.Context, f host.AttemptFilter, fn func(*host.Attempt, error) error) error {
	const op = "verify attempts"
	anchor, _ := s.checkAnchor()
	for {
		var a args
		where := attemptWhere(f, &a)
		rows, err := s.pool.Query(ctx, `SELECT `+attemptEntryColumns+` FROM attempt_records`+where+` ORDER BY seq DESC LIMIT `+strconv.Itoa(verifyPage), a...)
		if err != nil {
			return host.Wrap(op, "", err)
		}
		page, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*storecore.AttemptRow, error) {
			e, err := scanAttemptEntry(r)
			return e.at, err
		})
		if err != nil {
			return host.Wrap(op, "", err)
		}
		links, err := s.pageLinks(ctx, page)
		if err != nil {
			return host.Wrap(op, "", err)
		}
		if err := storecore.VerifyPage(ctx, page, links, anchor, s.readValues, fn); err != nil {
			return err
		}
		if len(page) < verifyPage {
			return nil
		}
		f.BeforeSeq = page[len(page)-1].Seq
	}
}

// pageLinks reads, in one statement, the links of both tables around
// every attempt of a page (linksAround, for a page).
func (s *Store) pageLinks(ctx context.Context, page []*storecore.AttemptRow) (*storecore.PageLinks, error) {
	links := storecore.NewPageLinks(page)
	rows, err := s.pool.Query(ctx, `SELECT seq, type, prev_hash, hash FROM runtime_events WHERE seq = ANY($1)
		UNION ALL SELECT seq, '', prev_hash, hash FROM attempt_records WHERE seq = ANY($1)`, links.Seqs())
	if err != nil {
		return nil, err
	}
	var at int64
	var l storecore.ChainLink
	_, err = pgx.ForEachRow(rows, []any{&at, &l.Kind, &l.Prev, &l.Hash}, func() error {
		links.Add(at, l)
		return nil
	})
	return links, err
}

// checkValues is the value pass of VerifyChain, after the walk and in its
// snapshot: every value a version 3 record names out of line must be
// stored and still hash to its digest (storecore.ValueCheck). Each is
// read and hashed once, however many attempts name it.
func checkValues(ctx context.Context, tx pgx.Tx) (*host.ChainBreak, error) {
	var values storecore.ValueCheck
	rows, err := tx.Query(ctx, `SELECT seq, attempt_id, record FROM attempt_records WHERE substring(record FROM 1 FOR 1) = $1 ORDER BY seq`, []byte{evidence.RecordV3})
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var seq int64
		var id string
		var rec []byte
		if err := rows.Scan(&seq, &id, &rec); err != nil {
			rows.Close()
			return nil, err
		}
		values.Need(seq, id, rec)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(values.Keys()) == 0 {
		return nil, nil
	}
	rows, err = tx.Query(ctx, `SELECT digest, value FROM evidence_values WHERE digest = ANY($1)`, values.Keys())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		values.Check(k, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return values.Break(), nil
}
