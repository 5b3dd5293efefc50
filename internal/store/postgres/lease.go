package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ host.Leases = (*Store)(nil)

// LeaseTTL implements host.Leases: Options.LeaseTTL.
func (s *Store) LeaseTTL() time.Duration { return s.opts.LeaseTTL }

// Claim implements host.Queue; a zero now means the store's clock. The
// next available task in queue order (priority, available_at, seq) is
// chosen with FOR UPDATE SKIP LOCKED, so concurrent claimers on any node
// each take a different task without waiting for one another, and moved
// to running in the same statement. The claim holds the task's lease
// until now + Options.LeaseTTL; Heartbeat extends it.
func (s *Store) Claim(ctx context.Context, runnerID string, now time.Time) (*host.TaskRecord, error) {
	const op = "claim"
	if err := host.CheckID(op, "runner_id", runnerID); err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = s.now()
	}
	lease := ts(now.Add(s.opts.LeaseTTL))
	var t *host.TaskRecord
	err := s.write(ctx, func(x *tx) error {
		var err error
		t, err = scanTask(x.QueryRow(ctx, `WITH next AS (
				SELECT seq FROM tasks WHERE status IN ('pending', 'retryable_failure') AND available_at <= $1
				ORDER BY priority, available_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED)
			UPDATE tasks t SET status = 'running', attempt_count = attempt_count + 1,
				started_at = $1, updated_at = $1, runner_id = $2, lease_expires_at = $3
			FROM next WHERE t.seq = next.seq
			RETURNING `+prefixed("t.", taskColumns), ts(now), runnerID, lease))
		if errors.Is(err, pgx.ErrNoRows) {
			return host.Errorf(op, "", host.ErrEmpty, "")
		}
		if err != nil {
			return err
		}
		_, err = x.event(host.EventTaskClaimed, t.TaskID, "", map[string]any{
			"attempt": t.AttemptCount, "max_attempts": t.MaxAttempts, "runner_id": runnerID, "lease_expires_at": lease})
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return t, nil
}

// prefixed qualifies each of a column list's names with p.
func prefixed(p, columns string) string {
	out := []byte(p)
	for i := 0; i < len(columns); i++ {
		out = append(out, columns[i])
		if columns[i] == ',' {
			for i+1 < len(columns) && (columns[i+1] == ' ' || columns[i+1] == '\n' || columns[i+1] == '\t') {
				i++
				out = append(out, columns[i])
			}
			out = append(out, p...)
		}
	}
	return string(out)
}

// Heartbeat implements host.Leases: it extends the lease of a running task held by runnerID on
// attempt attempt until now + Options.LeaseTTL, and returns the new
// expiry. A task no longer held by that runner and attempt (reclaimed,
// settled, claimed again) gives ErrConflict: the runner has lost it and
// must not expect its settlement to be accepted. A lease that expired
// but that no node reclaimed yet is extended. Heartbeats append no event.
func (s *Store) Heartbeat(ctx context.Context, taskID, runnerID string, attempt int) (time.Time, error) {
	const op = "heartbeat"
	exp := s.now().Add(s.opts.LeaseTTL)
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET lease_expires_at = $1
		WHERE task_id = $2 AND status = 'running' AND runner_id = $3 AND attempt_count = $4`, ts(exp), taskID, runnerID, attempt)
	if err != nil {
		return time.Time{}, host.Wrap(op, taskID, err)
	}
	if tag.RowsAffected() == 0 {
		return time.Time{}, host.Errorf(op, taskID, host.ErrConflict, "runner %s no longer holds attempt %d of the task", runnerID, attempt)
	}
	return parseTS(ts(exp)), nil
}

// ReclaimExpired implements host.Leases: the boot sweep generalised to many nodes: any node may
// call it at any time. Each running task whose lease expired before now
// (its holder stopped heartbeating: crashed, paused, partitioned) is
// settled as ReclaimRunning settles one, with event boot_sweep_reclaimed
// (data.reason "lease_expired"). Rows another node is reclaiming or
// settling are skipped (SKIP LOCKED). The holder, if it comes back, finds
// its settlement refused (see Finish). It returns how many tasks it
// reclaimed; at most 1000 per call.
func (s *Store) ReclaimExpired(ctx context.Context, now time.Time) (int, error) {
	if now.IsZero() {
		now = s.now()
	}
	return s.reclaim(ctx, "reclaim expired leases", now, storecore.ReclaimLeaseExpired,
		`status = 'running' AND lease_expires_at <= $1 ORDER BY seq LIMIT 1000 FOR UPDATE SKIP LOCKED`, ts(now))
}

// ReclaimRunning implements host.Queue: every running task, whatever its
// lease. It assumes no other runner is alive (a single node's boot
// sweep); nodes sharing the database use ReclaimExpired instead.
func (s *Store) ReclaimRunning(ctx context.Context, now time.Time) (int, error) {
	if now.IsZero() {
		now = s.now()
	}
	return s.reclaim(ctx, "reclaim running tasks", now, "boot_sweep", `status = 'running' ORDER BY seq FOR UPDATE`)
}

// reclaim settles the running tasks where (with args) selects: the
// interrupted attempt counts.
func (s *Store) reclaim(ctx context.Context, op string, now time.Time, reason, where string, args ...any) (int, error) {
	n := 0
	err := s.write(ctx, func(x *tx) error {
		rows, err := x.Query(ctx, `SELECT `+taskColumns+`, coalesce(lease_expires_at, '') FROM tasks WHERE `+where, args...)
		if err != nil {
			return err
		}
		type held struct {
			t     *host.TaskRecord
			lease string
		}
		running, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (held, error) {
			var h held
			t, err := scanTask(leaseRow{r, &h.lease})
			h.t = t
			return h, err
		})
		if err != nil {
			return err
		}
		n = len(running)
		for _, h := range running {
			if err := storecore.ReclaimTask(ctx, coreTx{x}, h.t, now, reason, h.lease); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	return n, nil
}

// leaseRow scans a task's columns and then its lease.
type leaseRow struct {
	pgx.Row
	lease *string
}

func (r leaseRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.lease)...) }
