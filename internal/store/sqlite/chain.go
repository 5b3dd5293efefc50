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
	"strings"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// VerifyChain implements host.Evidence (storecore.VerifyChain): the walk
// reads the two tables through the driver connection (walkChain), then
// the unchained rows and the values the records walked name are checked.
func (s *Store) VerifyChain(ctx context.Context) (*host.ChainReport, error) {
	var values storecore.ValueCheck // the values the records name (checkValues)
	return storecore.VerifyChain(s.checkCheckpoint, func(rep *host.ChainReport, anchor *host.ChainHead) (*host.ChainBreak, error) {
		return s.walkChain(ctx, rep, anchor, &values)
	}, func(*host.ChainReport, *host.ChainHead) (*host.ChainBreak, error) {
		return storecore.FindUnchained(ctx, coreDB{s}, storecore.SQLiteDialect)
	}, func(*host.ChainReport, *host.ChainHead) (*host.ChainBreak, error) {
		return s.checkValues(ctx, &values)
	})
}

// cursor reads one table's chain entries in seq order. A goroutine reads
// ahead, a chunk at a time, so that SQLite's reading overlaps the hashing
// of what was read (two cores make a walk ≈ 1.4× as fast).
type cursor struct {
	chunks chan []*storecore.ChainEntry
	err    error // set before chunks is closed
	chunk  []*storecore.ChainEntry
	next   *storecore.ChainEntry
}

// cursorChunk is how many entries a cursor reads ahead at a time; at most
// two chunks wait, so a walk's memory does not grow with the chain.
const cursorChunk = 128

// readAhead starts a cursor over the entries next reads (nil at the end).
// It stops early when stop is closed; wg tells when it no longer reads.
func readAhead(next func() (*storecore.ChainEntry, error), stop <-chan struct{}, wg *sync.WaitGroup) *cursor {
	c := &cursor{chunks: make(chan []*storecore.ChainEntry, 2)}
	wg.Go(func() {
		defer close(c.chunks)
		chunk := make([]*storecore.ChainEntry, 0, cursorChunk)
		send := func() bool {
			select {
			case c.chunks <- chunk:
				chunk = make([]*storecore.ChainEntry, 0, cursorChunk)
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
func driverEntries(rows driver.Rows, scan func(driverRow) (*storecore.ChainEntry, error)) func() (*storecore.ChainEntry, error) {
	row := make(driverRow, len(rows.Columns()))
	return func() (*storecore.ChainEntry, error) {
		if err := rows.Next(row); errors.Is(err, io.EOF) {
			return nil, nil
		} else if err != nil {
			return nil, err
		}
		return scan(row)
	}
}

// attemptWalkColumns are an attempt's row as the walk reads it: seq,
// attempt and record, then its text columns (storecore.AttemptEntryColumns'
// others, in that order) joined in one string with NUL bytes between
// them. SQLite joins them in C; the driver then converts four values a
// row instead of ten (each a pair of cgo calls, each text a Go string of
// its own): a fifth of a walk's time (BENCHMARKS.md, "evidence verify:
// an attempt's text columns read as one").
const attemptWalkColumns = `seq, attempt, record,
	attempt_id || char(0) || task_id || char(0) || tenant || char(0) || pack || char(0) || started_at || char(0) || prev_hash || char(0) || hash`

// scanAttemptWalk reads a row of attemptWalkColumns. A row whose text
// columns hold a NUL byte themselves (nothing packrun writes; a row
// changed behind its back might) does not split into them unambiguously:
// it is read again column by column, so the walk checks what is stored.
func scanAttemptWalk(ctx context.Context, conn *sqlite3.SQLiteConn, r driverRow) (*storecore.ChainEntry, error) {
	e := &storecore.ChainEntry{}
	at := &e.Row
	e.At = at
	var joined string
	for i, d := range []any{&e.Seq, &at.Attempt, &at.Record, &joined} {
		if err := assignValue(d, r[i]); err != nil {
			return nil, fmt.Errorf("sql: Scan error on column index %d: %w", i, err)
		}
	}
	at.Seq = e.Seq
	texts := [...]*string{&at.AttemptID, &at.TaskID, &at.Tenant, &at.Pack, &at.StartedAt, &at.Prev, &at.Hash}
	if strings.Count(joined, "\x00") != len(texts)-1 {
		return rereadAttempt(ctx, conn, e.Seq)
	}
	for _, d := range texts[:len(texts)-1] {
		*d, joined, _ = strings.Cut(joined, "\x00")
	}
	*texts[len(texts)-1] = joined
	return e, nil
}

// rereadAttempt reads the attempt row at seq column by column.
func rereadAttempt(ctx context.Context, conn *sqlite3.SQLiteConn, seq int64) (*storecore.ChainEntry, error) {
	rows, err := conn.QueryContext(ctx, `SELECT `+storecore.AttemptEntryColumns+` FROM attempt_records WHERE seq = ?`, []driver.NamedValue{{Ordinal: 1, Value: seq}})
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	e, err := driverEntries(rows, func(r driverRow) (*storecore.ChainEntry, error) { return storecore.ScanAttemptEntry(r) })()
	if err == nil && e == nil {
		err = fmt.Errorf("attempt row at seq %d: gone while the chain was read", seq)
	}
	return e, err
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
	evRows, err := conn.QueryContext(ctx, `SELECT `+storecore.EventColumns+` FROM runtime_events ORDER BY seq`, nil)
	if err != nil {
		return nil, err
	}
	defer evRows.Close()
	atRows, err := conn.QueryContext(ctx, `SELECT `+attemptWalkColumns+` FROM attempt_records WHERE seq > 0 ORDER BY seq`, nil)
	if err != nil {
		return nil, err
	}
	defer atRows.Close()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	defer readers.Wait()
	defer close(stop)
	evs := readAhead(driverEntries(evRows, func(r driverRow) (*storecore.ChainEntry, error) {
		ev, err := storecore.ScanEvent(r)
		if err != nil {
			return nil, err
		}
		return &storecore.ChainEntry{Seq: ev.Seq, Ev: ev}, nil
	}), stop, &readers)
	ats := readAhead(driverEntries(atRows, func(r driverRow) (*storecore.ChainEntry, error) { return scanAttemptWalk(ctx, conn, r) }), stop, &readers)
	if err := evs.advance(); err != nil {
		return nil, err
	}
	if err := ats.advance(); err != nil {
		return nil, err
	}
	// The two cursors merged in seq order, an event before an attempt
	// claiming the same place (storecore.WalkChain reports it).
	next := func() (*storecore.ChainEntry, error) {
		from := ats
		if ats.next == nil || (evs.next != nil && evs.next.Seq <= ats.next.Seq) {
			from = evs
		}
		e := from.next
		if e == nil {
			return nil, nil
		}
		return e, from.advance()
	}
	return storecore.WalkChain(storecore.ChainWalk{Next: next, Values: values, Resolve: func(e *storecore.ChainEntry) error {
		var err error
		if e.Ev.Type == host.EventArtifactRecorded {
			e.Art, err = s.chainedArtifact(ctx, e.Ev)
		} else {
			e.Msg, err = s.chainedMessage(ctx, e.Ev)
		}
		return err
	}}, rep, anchor)
}

// verifier is VerifyAttempt's and EachVerifiedAttempt's view of the store.
func (s *Store) verifier() storecore.Verifier {
	return storecore.Verifier{Q: coreDB{s}, Dialect: storecore.SQLiteDialect, Checkpoint: s.checkCheckpoint, Read: s.readValues}
}

// VerifyAttempt implements host.Evidence (storecore.Verifier).
func (s *Store) VerifyAttempt(ctx context.Context, attemptID string) error {
	return s.verifier().VerifyAttempt(ctx, attemptID)
}

// EachVerifiedAttempt implements host.Evidence (storecore.Verifier).
func (s *Store) EachVerifiedAttempt(ctx context.Context, f host.AttemptFilter, fn func(*host.Attempt, error) error) error {
	return s.verifier().EachVerifiedAttempt(ctx, f, fn)
}

// chainedArtifact reads the artifact an artifact_recorded event names,
// nil if none is stored.
func (s *Store) chainedArtifact(ctx context.Context, e *host.Event) (*host.Artifact, error) {
	var d struct {
		ArtifactID string `json:"artifact_id"`
	}
	_ = json.Unmarshal(e.Data, &d) // not JSON: no artifact is found, which CheckArtifact reports
	a, err := scanArtifact(s.db.QueryRowContext(ctx, `SELECT `+artifactColumns+` FROM artifacts WHERE artifact_id = ?`, d.ArtifactID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return a, err
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
