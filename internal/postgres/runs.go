package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/storecore"
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
		if _, err := x.Exec(ctx, `INSERT INTO openwop_runs (run_id, tenant, status, record) VALUES ($1, $2, $3, $4)`, r.RunID, r.Tenant, r.Status, string(rec)); err != nil {
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
func (s *Store) AdvanceRun(ctx context.Context, tenant, runID, status string, rerr *host.RunError, evs []host.RunEvent) (*host.Run, error) {
	var out *host.Run
	err := s.write(ctx, func(x *tx) error {
		r, err := loadRun(ctx, x, tenant, runID, true)
		if err != nil {
			return err
		}
		if host.RunTerminal(r.Status) {
			return host.Errorf("advance run", runID, host.ErrConflict, "the run is already %s", r.Status)
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

// UnfinishedRuns implements host.Runs.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]*host.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT record FROM openwop_runs WHERE status NOT IN ($1, $2, $3) ORDER BY seq`,
		host.RunCompleted, host.RunFailed, host.RunCancelled)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.Run, error) { return scanRun(r) })
}

func scanRun(row pgx.Row) (*host.Run, error) {
	var rec string
	if err := row.Scan(&rec); err != nil {
		return nil, err
	}
	var r host.Run
	return &r, json.Unmarshal([]byte(rec), &r)
}

// loadRun reads the tenant's run; forUpdate locks its row until the
// transaction ends.
func loadRun(ctx context.Context, q queryRower, tenant, runID string, forUpdate bool) (*host.Run, error) {
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE`
	}
	r, err := scanRun(q.QueryRow(ctx, `SELECT record FROM openwop_runs WHERE run_id = $1 AND tenant = $2`+lock, runID, storecore.TenantOr(tenant)))
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
