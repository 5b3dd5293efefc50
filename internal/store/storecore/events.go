package storecore

import (
	"context"
	"errors"
	"strconv"

	"github.com/packrun/packrun/host"
)

// Args numbers a query's arguments as they are added ($1, $2, ...).
type Args []any

// Add appends v and returns its placeholder.
func (a *Args) Add(v any) string {
	*a = append(*a, v)
	return "$" + strconv.Itoa(len(*a))
}

// EventColumns are runtime_events' columns as ScanEvent reads them.
const EventColumns = `seq, time, type, task_id, attempt_id, data, prev_hash, hash`

// Events is host.Evidence.Events. The attempt_recorded events are not
// rows of their own: each is built from its attempt's record (see
// AttemptEvent), and merged with the stored events in seq order.
func Events(ctx context.Context, q Querier, f host.EventFilter) ([]*host.Event, error) {
	const op = "list events"
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	after := f.AfterSeq
	if !f.Since.IsZero() {
		// The newest event stamped before Since, found from the end of
		// the chain: a recent Since reads few rows.
		var seq int64
		err := q.QueryRow(ctx, `SELECT seq FROM runtime_events WHERE time < $1 ORDER BY seq DESC LIMIT 1`, host.FormatTime(f.Since)).Scan(&seq)
		if err != nil && !errors.Is(err, ErrNoRows) {
			return nil, host.Wrap(op, "", err)
		}
		after = max(after, seq)
	}
	stored, err := readEvents(ctx, q, f, after, limit, true)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	var recorded []*host.Event
	if f.Type == "" || f.Type == host.EventAttemptRecorded {
		if recorded, err = readEvents(ctx, q, f, after, limit, false); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	return MergeEvents(stored, recorded, limit), nil
}

// readEvents reads the runtime_events rows f selects (stored), or builds
// the attempt_recorded events of the attempts it selects.
func readEvents(ctx context.Context, q Querier, f host.EventFilter, after int64, limit int, stored bool) ([]*host.Event, error) {
	var a Args
	where := ` WHERE seq > ` + a.Add(after)
	if f.TaskID != "" {
		where += ` AND task_id = ` + a.Add(f.TaskID)
	}
	if f.AttemptID != "" {
		where += ` AND attempt_id = ` + a.Add(f.AttemptID)
	}
	if f.Tenant != "" {
		// Both tables hold each entry's tenant (an event's set as it
		// was appended: DataTenant).
		where += ` AND tenant = ` + a.Add(f.Tenant)
	}
	query := `SELECT seq, record, prev_hash, hash FROM attempt_records`
	if stored {
		if f.Type != "" {
			where += ` AND type = ` + a.Add(f.Type)
		}
		query = `SELECT ` + EventColumns + ` FROM runtime_events`
	}
	rows, err := q.Query(ctx, query+where+` ORDER BY seq LIMIT `+a.Add(limit), a...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*host.Event
	for rows.Next() {
		var e *host.Event
		if stored {
			e, err = ScanEvent(rows)
		} else {
			var seq int64
			var rec []byte
			var prev, hash string
			if err = rows.Scan(&seq, &rec, &prev, &hash); err == nil {
				e, err = AttemptEvent(seq, rec, prev, hash)
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
