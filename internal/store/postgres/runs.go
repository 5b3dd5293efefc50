package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// PutOpenwopWorkflow implements host.Runs.
func (s *Store) PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error {
	const op = "put openwop workflow"
	if err := host.ValidateOpenwopWorkflow(op, w); err != nil {
		return err
	}
	c := *w
	c.Tenant = storecore.TenantOr(c.Tenant)
	def, err := json.Marshal(&c)
	if err != nil {
		return err
	}
	return s.write(ctx, func(x *tx) error {
		_, err := x.Exec(ctx, `INSERT INTO openwop_workflows (tenant, workflow_id, definition, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (tenant, workflow_id) DO UPDATE SET definition = excluded.definition, updated_at = excluded.updated_at`,
			c.Tenant, c.WorkflowID, string(def), ts(s.now()))
		return err
	})
}

// OpenwopWorkflow implements host.Runs.
func (s *Store) OpenwopWorkflow(ctx context.Context, tenant, id string) (*host.OpenwopWorkflow, error) {
	var def string
	err := s.pool.QueryRow(ctx, `SELECT definition FROM openwop_workflows WHERE tenant = $1 AND workflow_id = $2`, storecore.TenantOr(tenant), id).Scan(&def)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get openwop workflow", id, host.ErrNotFound, "no workflow has this id")
	}
	if err != nil {
		return nil, err
	}
	var w host.OpenwopWorkflow
	return &w, json.Unmarshal([]byte(def), &w)
}

// CreateRun implements host.Runs.
func (s *Store) CreateRun(ctx context.Context, r *host.Run, evs []host.RunEvent) error {
	r.Tenant = storecore.TenantOr(r.Tenant)
	now := s.now()
	r.CreatedAt, r.UpdatedAt = now, now
	return s.write(ctx, func(x *tx) error {
		rec, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := x.Exec(ctx, `INSERT INTO openwop_runs (run_id, tenant, status, record, holder, lease_until) VALUES ($1, $2, $3, $4, $5, $6)`,
			r.RunID, r.Tenant, r.Status, string(rec), r.Holder, storecore.LeaseMillis(r.LeaseUntil)); err != nil {
			return err
		}
		return x.appendRunEvents(ctx, r.RunID, 0, evs, now)
	})
}

// Run implements host.Runs.
func (s *Store) Run(ctx context.Context, tenant, runID string) (*host.Run, error) {
	return loadRun(ctx, s.pool, tenant, runID, false)
}

// AdvanceRun implements host.Runs. The run's row is locked: advances of
// one run from several nodes take turns, and its events stay numbered
// without a gap.
func (s *Store) AdvanceRun(ctx context.Context, tenant, runID, holder, status string, rerr *host.RunError, evs []host.RunEvent) (*host.Run, error) {
	var out *host.Run
	err := s.write(ctx, func(x *tx) error {
		r, err := loadRun(ctx, x, tenant, runID, true)
		if err != nil {
			return err
		}
		if err := storecore.CheckRunAdvance(r, holder); err != nil {
			return err
		}
		now := s.now()
		if status != "" {
			r.Status, r.Error, r.UpdatedAt = status, rerr, now
			rec, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if _, err := x.Exec(ctx, `UPDATE openwop_runs SET status = $1, record = $2 WHERE run_id = $3`, r.Status, string(rec), r.RunID); err != nil {
				return err
			}
		}
		var n int
		if err := x.QueryRow(ctx, `SELECT count(*) FROM openwop_run_events WHERE run_id = $1`, runID).Scan(&n); err != nil {
			return err
		}
		out = r
		return x.appendRunEvents(ctx, runID, n, evs, now)
	})
	return out, err
}

// RunEvents implements host.Runs.
func (s *Store) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	if _, err := s.Run(ctx, tenant, runID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT event FROM openwop_run_events WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.RunEvent, error) {
		var b string
		var e host.RunEvent
		if err := r.Scan(&b); err != nil {
			return e, err
		}
		return e, json.Unmarshal([]byte(b), &e)
	})
	if evs == nil && err == nil {
		evs = []host.RunEvent{}
	}
	return evs, err
}

// ClaimRuns implements host.Runs: one statement, whose rows are locked
// and skipped by any other node claiming at the same time (a run a node
// is advancing, its row locked, waits for the next claim).
func (s *Store) ClaimRuns(ctx context.Context, holder string, expired, until time.Time) ([]*host.Run, error) {
	if holder == "" {
		return nil, host.Invalid("claim runs", "holder", "required")
	}
	var out []*host.Run
	err := s.write(ctx, func(x *tx) error {
		rows, err := x.Query(ctx, `UPDATE openwop_runs SET holder = $1, lease_until = $2
			WHERE run_id IN (SELECT run_id FROM openwop_runs
				WHERE status NOT IN ('completed', 'failed', 'cancelled') AND lease_until <= $3
				ORDER BY seq FOR UPDATE SKIP LOCKED)
			RETURNING seq, record, holder, lease_until`,
			holder, storecore.LeaseMillis(until), expired.UnixMilli())
		if err != nil {
			return err
		}
		type claimed struct {
			seq int64
			r   *host.Run
		}
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
			var c claimed
			var rec string
			var lease int64
			c.r = &host.Run{}
			if err := row.Scan(&c.seq, &rec, &c.r.Holder, &lease); err != nil {
				return c, err
			}
			c.r.LeaseUntil = storecore.LeaseTime(lease)
			return c, json.Unmarshal([]byte(rec), c.r)
		})
		if err != nil {
			return err
		}
		sort.Slice(got, func(i, j int) bool { return got[i].seq < got[j].seq })
		out = make([]*host.Run, len(got))
		for i, c := range got {
			out[i] = c.r
		}
		return nil
	})
	return out, err
}

// RenewRuns implements host.Runs.
func (s *Store) RenewRuns(ctx context.Context, holder string, until time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(x *tx) error {
		tag, err := x.Exec(ctx, `UPDATE openwop_runs SET lease_until = $1 WHERE holder = $2 AND status NOT IN ('completed', 'failed', 'cancelled')`,
			storecore.LeaseMillis(until), holder)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}

func scanRun(row pgx.Row) (*host.Run, error) {
	var rec string
	var lease int64
	var r host.Run
	if err := row.Scan(&rec, &r.Holder, &lease); err != nil {
		return nil, err
	}
	r.LeaseUntil = storecore.LeaseTime(lease)
	return &r, json.Unmarshal([]byte(rec), &r)
}

// loadRun reads the tenant's run; forUpdate locks its row until the
// transaction ends.
func loadRun(ctx context.Context, q queryRower, tenant, runID string, forUpdate bool) (*host.Run, error) {
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE`
	}
	r, err := scanRun(q.QueryRow(ctx, `SELECT record, holder, lease_until FROM openwop_runs WHERE run_id = $1 AND tenant = $2`+lock, runID, storecore.TenantOr(tenant)))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get run", runID, host.ErrNotFound, "no run has this id")
	}
	return r, err
}

// appendRunEvents numbers evs from next and stores them.
func (x *tx) appendRunEvents(ctx context.Context, runID string, next int, evs []host.RunEvent, now time.Time) error {
	storecore.NumberRunEvents(runID, next, evs, now)
	for i := range evs {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return err
		}
		if _, err := x.Exec(ctx, `INSERT INTO openwop_run_events (run_id, seq, event) VALUES ($1, $2, $3)`, runID, evs[i].Seq, string(b)); err != nil {
			return err
		}
	}
	return nil
}
