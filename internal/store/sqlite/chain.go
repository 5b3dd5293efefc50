package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
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
	anchor, brk := s.checkCheckpoint()
	rep.Checkpoint = anchor
	var values storecore.ValueCheck // the values the records name (checkValues)
	if brk == nil {
		var err error
		if brk, err = s.walkChain(ctx, rep, anchor, &values); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	if brk == nil {
		var err error
		if brk, err = s.findUnchained(ctx); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	if brk == nil {
		var err error
		if brk, err = s.checkValues(ctx, &values); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	rep.Broken = brk
	rep.OK = brk == nil
	return rep, nil
}

// chainEntry is one entry of the chain: a stored event, or an attempt
// (whose row is its entry; its attempt_recorded event is built from it).
type chainEntry struct {
	seq int64
	ev  *host.Event
	at  *storecore.AttemptRow
	row storecore.AttemptRow // at, for an attempt read by the walk (one allocation a row)
}

func (e *chainEntry) hash() string {
	if e.ev != nil {
		return e.ev.Hash
	}
	return e.at.Hash
}

const attemptEntryColumns = `seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash`

func scanAttemptEntry(row interface{ Scan(...any) error }) (*chainEntry, error) {
	e := &chainEntry{}
	at := &e.row
	e.at = at
	err := row.Scan(&e.seq, &at.AttemptID, &at.TaskID, &at.Attempt, &at.Tenant, &at.Pack, &at.StartedAt, &at.Record, &at.Prev, &at.Hash)
	at.Seq = e.seq
	return e, err
}

// cursor reads one table's chain entries in seq order. A goroutine reads
// ahead, a chunk at a time, so that SQLite's reading overlaps the hashing
// of what was read (two cores make a walk ≈ 1.4× as fast).
type cursor struct {
	chunks chan []*chainEntry
	err    error // set before chunks is closed
	chunk  []*chainEntry
	next   *chainEntry
}

// cursorChunk is how many entries a cursor reads ahead at a time; at most
// two chunks wait, so a walk's memory does not grow with the chain.
const cursorChunk = 128

// readAhead starts a cursor over the entries next reads (nil at the end).
// It stops early when stop is closed; wg tells when it no longer reads.
func readAhead(next func() (*chainEntry, error), stop <-chan struct{}, wg *sync.WaitGroup) *cursor {
	c := &cursor{chunks: make(chan []*chainEntry, 2)}
	wg.Go(func() {
		defer close(c.chunks)
		chunk := make([]*chainEntry, 0, cursorChunk)
		send := func() bool {
			select {
			case c.chunks <- chunk:
				chunk = make([]*chainEntry, 0, cursorChunk)
				return true
			case <-stop:
				return false
			}
		}
		for {
			e, err := next()
			if err != nil {
				c.err = err
				return
			}
			if e == nil {
				break
			}
			if chunk = append(chunk, e); len(chunk) == cursorChunk && !send() {
				return
			}
		}
		if len(chunk) > 0 {
			send()
		}
	})
	return c
}

func (c *cursor) advance() error {
	if len(c.chunk) == 0 {
		chunk, ok := <-c.chunks
		if !ok {
			c.next = nil
			return c.err
		}
		c.chunk = chunk
	}
	c.next, c.chunk = c.chunk[0], c.chunk[1:]
	return nil
}

// driverRow is a row read from the driver's rows directly: the walk reads
// through the driver connection, without database/sql's locking and
// conversions per row and its second copy of each record (a third of a
// walk's CPU). Scan converts as database/sql does, for the destinations
// the chain's scans use (*int64, *string, *[]byte).
type driverRow []driver.Value

func (r driverRow) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return fmt.Errorf("sql: expected %d destination arguments in Scan, not %d", len(r), len(dest))
	}
	for i, v := range r {
		if err := assignValue(dest[i], v); err != nil {
			return fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	return nil
}

// assignValue stores a driver value in dest as database/sql's Scan does.
func assignValue(dest any, v driver.Value) error {
	text := func() (string, bool) {
		switch v := v.(type) {
		case string:
			return v, true
		case []byte:
			return string(v), true
		case int64:
			return strconv.FormatInt(v, 10), true
		case float64:
			return strconv.FormatFloat(v, 'g', -1, 64), true
		case bool:
			return strconv.FormatBool(v), true
		}
		return "", false
	}
	switch d := dest.(type) {
	case *int64:
		if n, ok := v.(int64); ok {
			*d = n
			return nil
		}
		s, ok := text()
		if !ok {
			return fmt.Errorf("converting %T to int64 is unsupported", v)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("converting driver.Value type %T (%q) to a int64: %w", v, s, err)
		}
		*d = n
	case *string:
		s, ok := text()
		if !ok {
			return fmt.Errorf("converting %T to string is unsupported", v)
		}
		*d = s
	case *[]byte:
		switch v := v.(type) {
		case nil:
			*d = nil
		case []byte: // the driver's own copy
			*d = v
		default:
			s, ok := text()
			if !ok {
				return fmt.Errorf("converting %T to []byte is unsupported", v)
			}
			*d = []byte(s)
		}
	default:
		return fmt.Errorf("unsupported Scan destination %T", dest)
	}
	return nil
}

// driverEntries reads rows' entries with scan; nil at the end.
func driverEntries(rows driver.Rows, scan func(driverRow) (*chainEntry, error)) func() (*chainEntry, error) {
	row := make(driverRow, len(rows.Columns()))
	return func() (*chainEntry, error) {
		if err := rows.Next(row); errors.Is(err, io.EOF) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return scan(row)
	}
}

// walkChain walks the chain; values is told the values each attempt's
// record names, for checkValues.
func (s *Store) walkChain(ctx context.Context, rep *host.ChainReport, anchor *host.ChainHead, values *storecore.ValueCheck) (*host.ChainBreak, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var brk *host.ChainBreak
	err = conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("walk the chain: driver connection %T", dc)
		}
		var err error
		brk, err = s.walkConn(ctx, c, rep, anchor, values)
		return err
	})
	return brk, err
}

// walkConn walks the chain on one driver connection.
func (s *Store) walkConn(ctx context.Context, conn *sqlite3.SQLiteConn, rep *host.ChainReport, anchor *host.ChainHead, values *storecore.ValueCheck) (*host.ChainBreak, error) {
	// Both tables are read in one transaction, so they are read as of one
	// moment.
	tx, err := conn.BeginTx(ctx, driver.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	evRows, err := conn.QueryContext(ctx, `SELECT `+eventColumns+` FROM runtime_events ORDER BY seq`, nil)
	if err != nil {
		return nil, err
	}
	defer evRows.Close()
	atRows, err := conn.QueryContext(ctx, `SELECT `+attemptEntryColumns+` FROM attempt_records WHERE seq > 0 ORDER BY seq`, nil)
	if err != nil {
		return nil, err
	}
	defer atRows.Close()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	defer readers.Wait()
	defer close(stop)
	evs := readAhead(driverEntries(evRows, func(r driverRow) (*chainEntry, error) {
		ev, err := storecore.ScanEvent(r)
		if err != nil {
			return nil, err
		}
		return &chainEntry{seq: ev.Seq, ev: ev}, nil
	}), stop, &readers)
	ats := readAhead(driverEntries(atRows, func(r driverRow) (*chainEntry, error) { return scanAttemptEntry(r) }), stop, &readers)
	if err := evs.advance(); err != nil {
		return nil, err
	}
	if err := ats.advance(); err != nil {
		return nil, err
	}
	c := s.newChecker(ctx)
	c.values = values
	prev, want := evidence.GenesisHash, int64(1)
	var anchorHash string
	for evs.next != nil || ats.next != nil {
		var from *cursor
		switch {
		case evs.next != nil && ats.next != nil && evs.next.seq == ats.next.seq:
			return storecore.InsertedAttempt(ats.next.at.AttemptID, ats.next.seq, evs.next.ev.Type), nil
		case ats.next == nil || (evs.next != nil && evs.next.seq < ats.next.seq):
			from = evs
		default:
			from = ats
		}
		e := from.next
		if e.seq != want {
			return &host.ChainBreak{Seq: e.seq, Problem: host.BreakSeqGap, Detail: fmt.Sprintf("expected event %d, found %d: events were removed", want, e.seq)}, nil
		}
		brk, err := c.check(e, prev)
		if brk != nil || err != nil {
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
		prev, want = e.hash(), want+1
		if err := from.advance(); err != nil {
			return nil, err
		}
		rep.Events++
		rep.Head, rep.HeadSeq = prev, e.seq
		if anchor != nil && e.seq == anchor.Seq {
			anchorHash = prev
		}
	}
	return evidence.CheckAnchor(rep, anchorHash, anchor), nil
}

// checker checks chain entries one at a time.
type checker struct {
	s      *Store
	ctx    context.Context
	values *storecore.ValueCheck // may be nil
}

func (s *Store) newChecker(ctx context.Context) *checker { return &checker{s: s, ctx: ctx} }

// check checks one entry against the hash of the entry before it.
func (c *checker) check(e *chainEntry, prev string) (*host.ChainBreak, error) {
	if e.at != nil {
		c.values.Need(e.seq, e.at.AttemptID, e.at.Record)
		return storecore.CheckAttemptRow(e.at, prev), nil
	}
	ev := e.ev
	if brk := storecore.CheckEventLink(ev, prev); brk != nil {
		return brk, nil
	}
	// CheckEventLink also breaks at a stored attempt_recorded event:
	// attempts are chained by their own rows, so it is one whose attempt
	// was gone when the store moved to attempt records.
	switch ev.Type {
	case host.EventArtifactRecorded:
		return c.s.checkArtifact(c.ctx, ev)
	case host.EventMessageAccepted:
		return c.s.checkMessage(c.ctx, ev)
	}
	return nil, nil
}

// VerifyAttempt implements host.Evidence: it checks the attempt's row
// against its link, and the entry after it against the attempt's link (so
// that a row rewritten with a link to match is found too).
func (s *Store) VerifyAttempt(ctx context.Context, attemptID string) error {
	const op = "verify attempt"
	e, err := scanAttemptEntry(s.queryRow(ctx, `SELECT `+attemptEntryColumns+` FROM attempt_records WHERE attempt_id = ?`, attemptID))
	if errors.Is(err, sql.ErrNoRows) {
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
	anchor, _ := s.checkCheckpoint()
	if brk := storecore.CheckAttemptPlace(e.at, around, anchor); brk != nil {
		return brk
	}
	return nil
}

// linksAround reads, in one statement, the links of both tables at seq-1,
// seq and seq+1: all that checking an attempt's place needs besides its
// own row.
func (s *Store) linksAround(ctx context.Context, seq int64) (*storecore.LinksAround, error) {
	rows, err := s.query(ctx, `SELECT seq, type, prev_hash, hash FROM runtime_events WHERE seq BETWEEN ?1 - 1 AND ?1 + 1
		UNION ALL SELECT seq, '', prev_hash, hash FROM attempt_records WHERE seq BETWEEN ?1 - 1 AND ?1 + 1`, seq)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ls := &storecore.LinksAround{Seq: seq}
	for rows.Next() {
		var at int64
		var l storecore.ChainLink
		if err := rows.Scan(&at, &l.Kind, &l.Prev, &l.Hash); err != nil {
			return nil, err
		}
		ls.Add(at, l)
	}
	return ls, rows.Err()
}

func (s *Store) checkArtifact(ctx context.Context, e *host.Event) (*host.ChainBreak, error) {
	var d struct {
		ArtifactID string `json:"artifact_id"`
	}
	json.Unmarshal(e.Data, &d)
	a, err := scanArtifact(s.db.QueryRowContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE artifact_id = ?`, d.ArtifactID))
	if errors.Is(err, sql.ErrNoRows) {
		return storecore.CheckArtifact(e, nil), nil
	}
	if err != nil {
		return nil, err
	}
	return storecore.CheckArtifact(e, a), nil
}

// findUnchained reports the first attempt or artifact that no place in the
// chain is (an attempt carried over from before attempt records without
// its event), or whose row does not point at its own recording event
// (inserted behind the chain's back).
func (s *Store) findUnchained(ctx context.Context) (*host.ChainBreak, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT attempt_id FROM attempt_records WHERE seq <= 0 LIMIT 1`).Scan(&id)
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
	return s.findUnchainedMessage(ctx)
}

// checkValues is the value pass of VerifyChain, after the walk: every
// value the records walked name out of line must be stored and still
// hash to its digest (storecore.ValueCheck). Each is read and hashed
// once, however many attempts name it.
func (s *Store) checkValues(ctx context.Context, values *storecore.ValueCheck) (*host.ChainBreak, error) {
	for _, k := range values.Keys() {
		var v []byte
		err := s.db.QueryRowContext(ctx, `SELECT value FROM evidence_values WHERE digest = ?`, k).Scan(&v)
		if errors.Is(err, sql.ErrNoRows) {
			continue // Break reports it missing
		}
		if err != nil {
			return nil, err
		}
		values.Check(k, v)
	}
	return values.Break(), nil
}
