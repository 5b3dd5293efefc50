package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// moveLegacyAttempts carries the attempts of a store written before
// attempt records (migration 6) over to them, in one transaction: each
// task_attempts row with the attempt_recorded event that chained it
// becomes one version 1 record (evidence.AppendLegacyRecord) at that
// event's place in the chain, keeping the event's hash as its link, so
// that every hash, the signed checkpoint and a pinned head still hold and
// `evidence verify` checks the old attempts as before. The event rows it
// replaces are removed, then task_attempts is dropped.
//
// Nothing is repaired on the way: an attempt whose event is gone keeps no
// place in the chain (a negative seq; verify reports it unchained), and an
// event whose attempt is gone stays (verify reports the attempt missing).
// A crash leaves the store as it was before (the transaction), and the move
// runs again at the next open.
func moveLegacyAttempts(ctx context.Context, d *sql.DB) (moved int, err error) {
	var n int
	if err := d.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'task_attempts'`).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	conn, err := d.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.Background(), `ROLLBACK`) // the error returned is err
		}
	}()
	// The triggers keep runtime_events append-only; this one move is the
	// exception, made inside the transaction.
	if _, err := conn.ExecContext(ctx, `DROP TRIGGER IF EXISTS runtime_events_no_delete`); err != nil {
		return 0, err
	}
	var unchained int64
	for after := int64(-1 << 62); ; {
		rows, err := conn.QueryContext(ctx, `SELECT a.rowid, `+legacyColumns+`, e.seq, e.time, e.data, e.prev_hash, e.hash
			FROM task_attempts a LEFT JOIN runtime_events e ON e.seq = a.event_seq AND e.type = 'attempt_recorded' AND e.attempt_id = a.attempt_id
			WHERE a.rowid > ? ORDER BY a.rowid LIMIT 500`, after)
		if err != nil {
			return moved, err
		}
		type move struct {
			seq        int64
			a          *host.Attempt
			record     []byte
			prev, hash string
		}
		var page []move
		for rows.Next() {
			var rowid int64
			var seq sql.NullInt64
			var evTime, evData, evPrev, evHash sql.NullString
			a, err := scanLegacyAttempt(rows, &rowid, &seq, &evTime, &evData, &evPrev, &evHash)
			if err != nil {
				rows.Close()
				return moved, fmt.Errorf("read attempt at row %d of task_attempts: %w", rowid, err)
			}
			after = rowid
			m := move{a: a}
			if seq.Valid {
				m.seq, m.prev, m.hash = seq.Int64, evPrev.String, evHash.String
				m.record = evidence.AppendLegacyRecord(nil, a, evidence.Legacy{ContentHash: a.ContentHash, EventTime: parseTS(evTime.String), EventData: []byte(evData.String)})
			} else {
				unchained++
				m.seq = -unchained
				m.record = evidence.AppendLegacyRecord(nil, a, evidence.Legacy{ContentHash: a.ContentHash})
			}
			page = append(page, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return moved, err
		}
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			a := m.a
			if _, err := conn.ExecContext(ctx, `INSERT INTO attempt_records (seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				m.seq, a.AttemptID, a.TaskID, a.Attempt, a.Tenant, a.Pack, ts(a.StartedAt), m.record, m.prev, m.hash); err != nil {
				return moved, fmt.Errorf("carry attempt %s over: %w", a.AttemptID, err)
			}
			if m.seq > 0 {
				if _, err := conn.ExecContext(ctx, `DELETE FROM runtime_events WHERE seq = ?`, m.seq); err != nil {
					return moved, err
				}
			}
			moved++
		}
	}
	for _, q := range []string{
		`CREATE TRIGGER IF NOT EXISTS runtime_events_no_delete BEFORE DELETE ON runtime_events
			BEGIN SELECT RAISE(ABORT, 'runtime_events is append-only'); END`,
		`DROP TABLE task_attempts`,
		`COMMIT`,
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// legacyColumns are task_attempts' columns, as scanLegacyAttempt reads them.
const legacyColumns = `a.attempt_id, a.task_id, a.runner_id, a.pack, a.module_sha256, a.node, a.tenant, a.run_id, a.attempt, a.abi_version,
	a.input, a.output, a.interrupt, a.outcome, a.error, a.exit_status, a.retry_class, a.stdout, a.stderr, a.logs, a.events, a.trace, a.limits, a.adapter_calls, a.diagnostics,
	a.started_at, a.ended_at, a.content_hash`

// scanLegacyAttempt reads a task_attempts row back into the form it was
// hashed in (HashAttemptV1), followed by extra destinations.
func scanLegacyAttempt(row interface{ Scan(...any) error }, rowid *int64, extra ...any) (*host.Attempt, error) {
	var a host.Attempt
	var input, output, interrupt, outcome, errJSON, exit, retry, logs, events, trace, limits, calls, diag, started, ended string
	dest := []any{rowid, &a.AttemptID, &a.TaskID, &a.RunnerID, &a.Pack, &a.ModuleSHA256, &a.Node, &a.Tenant, &a.RunID, &a.Attempt, &a.ABIVersion,
		&input, &output, &interrupt, &outcome, &errJSON, &exit, &retry, &a.Stdout, &a.Stderr, &logs, &events, &trace, &limits, &calls, &diag,
		&started, &ended, &a.ContentHash}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	a.Input, a.Output, a.Interrupt = textRaw(input), textRaw(output), textRaw(interrupt)
	a.Logs, a.Events, a.Trace, a.Limits, a.AdapterCalls, a.Diagnostics = textRaw(logs), textRaw(events), textRaw(trace), textRaw(limits), textRaw(calls), textRaw(diag)
	a.Outcome, a.ExitStatus, a.RetryClass = abi.Outcome(outcome), host.ExitStatus(exit), host.RetryClass(retry)
	if errJSON != "" {
		a.Error = new(abi.Error)
		if err := json.Unmarshal([]byte(errJSON), a.Error); err != nil {
			// Carried over as it reads; verify then reports the change.
			a.Error = &abi.Error{Message: errJSON}
		}
		if len(a.Error.Details) == 0 {
			a.Error.Details = nil
		}
	}
	if len(a.Stdout) == 0 {
		a.Stdout = nil
	}
	if len(a.Stderr) == 0 {
		a.Stderr = nil
	}
	a.StartedAt, a.EndedAt = parseTS(started), parseTS(ended)
	return &a, nil
}
