package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

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
	return s.w.do(ctx, func(tx *wtx) error {
		_, err := tx.Exec(`INSERT INTO openwop_workflows (tenant, workflow_id, definition, updated_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (tenant, workflow_id) DO UPDATE SET definition = excluded.definition, updated_at = excluded.updated_at`,
			c.Tenant, c.WorkflowID, string(def), ts(s.now()))
		return err
	})
}

// OpenwopWorkflow implements host.Runs.
func (s *Store) OpenwopWorkflow(ctx context.Context, tenant, id string) (*host.OpenwopWorkflow, error) {
	var def string
	err := s.db.QueryRowContext(ctx, `SELECT definition FROM openwop_workflows WHERE tenant = ? AND workflow_id = ?`, storecore.TenantOr(tenant), id).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
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
	return s.w.do(ctx, func(tx *wtx) error {
		if err := writeRun(tx, r, true); err != nil {
			return err
		}
		return appendRunEvents(tx, r.RunID, 0, evs, now)
	})
}

// Run implements host.Runs.
func (s *Store) Run(ctx context.Context, tenant, runID string) (*host.Run, error) {
	return loadRun(s.db, ctx, tenant, runID)
}

// AdvanceRun implements host.Runs.
func (s *Store) AdvanceRun(ctx context.Context, tenant, runID, holder, status string, rerr *host.RunError, evs []host.RunEvent) (*host.Run, error) {
	var out *host.Run
	err := s.w.do(ctx, func(tx *wtx) error {
		r, err := loadRun(txq{tx}, ctx, tenant, runID)
		if err != nil {
			return err
		}
		if err := storecore.CheckRunAdvance(r, holder); err != nil {
			return err
		}
		now := s.now()
		if status != "" {
			r.Status, r.Error, r.UpdatedAt = status, rerr, now
			if err := writeRun(tx, r, false); err != nil {
				return err
			}
		}
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM openwop_run_events WHERE run_id = ?`, runID).Scan(&n); err != nil {
			return err
		}
		out = r
		return appendRunEvents(tx, runID, n, evs, now)
	})
	return out, err
}

// RunEvents implements host.Runs.
func (s *Store) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	if _, err := s.Run(ctx, tenant, runID); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT event FROM openwop_run_events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	evs := []host.RunEvent{}
	for rows.Next() {
		var b string
		var e host.RunEvent
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(b), &e); err != nil {
			return nil, err
		}
		evs = append(evs, e)
	}
	return evs, rows.Err()
}

// ClaimRuns implements host.Runs. The store has one writer: the runs
// read and the leases set are one transaction.
func (s *Store) ClaimRuns(ctx context.Context, holder string, expired, until time.Time) ([]*host.Run, error) {
	if holder == "" {
		return nil, host.Invalid("claim runs", "holder", "required")
	}
	var out []*host.Run
	err := s.w.do(ctx, func(tx *wtx) error {
		out = nil
		rows, err := tx.Query(`SELECT record FROM openwop_runs WHERE status NOT IN (?, ?, ?) AND lease_until <= ? ORDER BY rowid`,
			host.RunCompleted, host.RunFailed, host.RunCancelled, expired.UnixMilli())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var rec string
			if err := rows.Scan(&rec); err != nil {
				return err
			}
			r := &host.Run{}
			if err := json.Unmarshal([]byte(rec), r); err != nil {
				return err
			}
			r.Holder, r.LeaseUntil = holder, storecore.LeaseTime(storecore.LeaseMillis(until))
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		for _, r := range out {
			if _, err := tx.Exec(`UPDATE openwop_runs SET holder = ?, lease_until = ? WHERE run_id = ?`, holder, storecore.LeaseMillis(until), r.RunID); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// RenewRuns implements host.Runs.
func (s *Store) RenewRuns(ctx context.Context, holder string, until time.Time) (int, error) {
	var n int64
	err := s.w.do(ctx, func(tx *wtx) error {
		res, err := tx.Exec(`UPDATE openwop_runs SET lease_until = ? WHERE holder = ? AND status NOT IN (?, ?, ?)`,
			storecore.LeaseMillis(until), holder, host.RunCompleted, host.RunFailed, host.RunCancelled)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

func writeRun(tx *wtx, r *host.Run, create bool) error {
	rec, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if create {
		_, err = tx.Exec(`INSERT INTO openwop_runs (run_id, tenant, status, record, holder, lease_until) VALUES (?, ?, ?, ?, ?, ?)`,
			r.RunID, r.Tenant, r.Status, string(rec), r.Holder, storecore.LeaseMillis(r.LeaseUntil))
	} else {
		_, err = tx.Exec(`UPDATE openwop_runs SET status = ?, record = ? WHERE run_id = ?`, r.Status, string(rec), r.RunID)
	}
	return err
}

func loadRun(q queryer, ctx context.Context, tenant, runID string) (*host.Run, error) {
	var rec string
	var lease int64
	var holder string
	err := q.QueryRowContext(ctx, `SELECT record, holder, lease_until FROM openwop_runs WHERE run_id = ? AND tenant = ?`, runID, storecore.TenantOr(tenant)).Scan(&rec, &holder, &lease)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf("get run", runID, host.ErrNotFound, "no run has this id")
	}
	if err != nil {
		return nil, err
	}
	var r host.Run
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return nil, err
	}
	r.Holder, r.LeaseUntil = holder, storecore.LeaseTime(lease)
	return &r, nil
}

// appendRunEvents numbers evs from next and stores them; payload and data
// carry the same detail.
func appendRunEvents(tx *wtx, runID string, next int, evs []host.RunEvent, now time.Time) error {
	storecore.NumberRunEvents(runID, next, evs, now)
	for i := range evs {
		e := &evs[i]
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO openwop_run_events (run_id, seq, event) VALUES (?, ?, ?)`, runID, e.Seq, string(b)); err != nil {
			return err
		}
	}
	return nil
}
