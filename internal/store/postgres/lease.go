package postgres

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
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
// until now + Options.LeaseTTL; Heartbeat extends it. Claims that share a
// writer's batch are answered together (claimTogether).
func (s *Store) Claim(ctx context.Context, runnerID string, now time.Time) (*host.TaskRecord, error) {
	const what = "claim"
	if err := host.CheckID(what, "runner_id", runnerID); err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = s.now()
	}
	o, claimed := s.claimOp(ctx, runnerID, now)
	if err := s.w.send(o); err != nil {
		return nil, host.Wrap(what, "", err)
	}
	return claimed(), nil
}

// claimOp is Claim's write operation; claimed is its task once it ran
// without error.
func (s *Store) claimOp(ctx context.Context, runnerID string, now time.Time) (o *op, claimed func() *host.TaskRecord) {
	c := &claimReq{runner: runnerID, now: now}
	var t *host.TaskRecord
	return &op{ctx: ctx, claim: c, fn: func(x *tx) error {
		lease := ts(now.Add(s.opts.LeaseTTL))
		if c.ready {
			// Claimed with the batch's other claims: taken once, so that
			// a run of fn in another transaction claims anew.
			t, lease = c.task, c.lease
			c.ready, c.task = false, nil
		} else {
			var version int64
			var err error
			t, err = scanTask(leadingRow{x.QueryRow(ctx, claimQuery(1), ts(now), runnerID, lease), []any{&version}})
			if errors.Is(err, pgx.ErrNoRows) {
				t = nil
			} else if err != nil {
				return err
			} else {
				s.setups.saw(version)
			}
		}
		if t == nil {
			return host.Errorf("claim", "", host.ErrEmpty, "")
		}
		_, err := x.event(host.EventTaskClaimed, t.TaskID, "", map[string]any{
			"attempt": t.AttemptCount, "max_attempts": t.MaxAttempts, "runner_id": runnerID, "lease_expires_at": lease})
		return err
	}}, func() *host.TaskRecord { return t }
}

// claimQuery moves up to n available tasks, the first in queue order, to
// running for runner $2 with lease $3, as of $1, and returns them after
// their seq (n > 1) and the configuration version (setupCache).
func claimQuery(n int) string {
	returning := "(SELECT version FROM config_version), " + prefixed("t.", taskColumns)
	if n > 1 {
		returning = "t.seq, " + returning
	}
	return `WITH next AS (
			SELECT seq FROM tasks WHERE status IN ('pending', 'retryable_failure') AND available_at <= $1
			ORDER BY priority, available_at, seq LIMIT ` + strconv.Itoa(n) + ` FOR UPDATE SKIP LOCKED)
		UPDATE tasks t SET status = 'running', attempt_count = attempt_count + 1,
			started_at = $1, updated_at = $1, runner_id = $2, lease_expires_at = $3
		FROM next WHERE t.seq = next.seq
		RETURNING ` + returning
}

// claimReq is a Claim waiting in a writer's batch.
type claimReq struct {
	runner string
	now    time.Time
	// ready: claimTogether has claimed for it, task (nil: the queue had
	// none left) under lease, in the batch's transaction.
	ready bool
	task  *host.TaskRecord
	lease string
}

// claimWindow is how far apart the times of one runner's claims may be
// for one statement to answer them.
const claimWindow = time.Second

// claimTogether answers the claims of a batch with one statement for
// each runner's claims within claimWindow of one another, as of the
// latest of their times, instead of one statement (and, behind a
// network, one round trip in series) each. The tasks go to the claims in
// queue order, in the order the claims came; claims left without one find
// the queue empty, as each would have alone. If the statement fails it
// is rolled back to its savepoint and each claim claims for itself.
func (x *tx) claimTogether(ctx context.Context, ops []*op) error {
	var claims []*claimReq
	for _, o := range ops {
		if o.claim != nil && o.ctx.Err() == nil {
			claims = append(claims, o.claim)
		}
	}
	if len(claims) < 2 {
		return nil
	}
	slices.SortStableFunc(claims, func(a, b *claimReq) int {
		return cmp.Or(strings.Compare(a.runner, b.runner), a.now.Compare(b.now))
	})
	for len(claims) > 0 {
		n := 1
		for n < len(claims) && claims[n].runner == claims[0].runner && claims[n].now.Sub(claims[0].now) <= claimWindow {
			n++
		}
		group := claims[:n]
		claims = claims[n:]
		if n < 2 {
			continue
		}
		if err := x.claimGroup(ctx, group); err != nil {
			return err
		}
	}
	return nil
}

// claimGroup claims for group (one runner's claims, by time) in one
// statement.
func (x *tx) claimGroup(ctx context.Context, group []*claimReq) error {
	now := group[len(group)-1].now
	lease := ts(now.Add(x.s.opts.LeaseTTL))
	x.sp, x.savepoint = "claims", true
	rows, err := x.Query(ctx, claimQuery(len(group)), ts(now), group[0].runner, lease)
	type claimedRow struct {
		seq int64
		t   *host.TaskRecord
	}
	var got []claimedRow
	var version int64
	if err == nil {
		for rows.Next() {
			var c claimedRow
			if c.t, err = scanTask(leadingRow{rows, []any{&c.seq, &version}}); err != nil {
				break
			}
			got = append(got, c)
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return x.undo() // each claim claims for itself instead
	}
	if len(got) > 0 {
		x.s.setups.saw(version)
	}
	slices.SortFunc(got, func(a, b claimedRow) int {
		return cmp.Or(cmp.Compare(a.t.Priority, b.t.Priority), a.t.AvailableAt.Compare(b.t.AvailableAt), cmp.Compare(a.seq, b.seq))
	})
	for i, c := range group {
		c.ready, c.task, c.lease = true, nil, lease
		if i < len(got) {
			c.task = got[i].t
		}
	}
	return nil
}

// leadingRow scans a row's first columns into lead, the rest into what
// its reader asks for.
type leadingRow struct {
	row  pgx.Row
	lead []any
}

func (r leadingRow) Scan(dest ...any) error {
	return r.row.Scan(append(r.lead[:len(r.lead):len(r.lead)], dest...)...)
}

// unclaim drops what claimTogether claimed for ops in a transaction that
// did not commit: run again, each claims anew.
func unclaim(ops []*op) {
	for _, o := range ops {
		if o.claim != nil {
			o.claim.ready, o.claim.task = false, nil
		}
	}
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
