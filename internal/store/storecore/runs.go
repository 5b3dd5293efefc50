package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/packrun/packrun/host"
)

// The openwop runs store of host.Runs written once against Tx: workflow
// definitions, runs with their leases, and their numbered events.

// runUnfinished is the condition of a run not yet ended, as
// PostgreSQL's partial index openwop_runs_unfinished says it.
const runUnfinished = `status NOT IN ('completed', 'failed', 'cancelled')`

// runClaimable is the condition of a run a runner may claim: unfinished
// and not waiting for a person (ResumeRun takes it back).
const runClaimable = runUnfinished + ` AND status <> 'waiting-approval'`

// OpenwopDefinition checks w and returns the copy to store (its tenant
// set) and its JSON.
func OpenwopDefinition(op string, w *host.OpenwopWorkflow) (*host.OpenwopWorkflow, []byte, error) {
	if err := host.ValidateOpenwopWorkflow(op, w); err != nil {
		return nil, nil, err
	}
	c := *w
	c.Tenant = TenantOr(c.Tenant)
	def, err := json.Marshal(&c)
	return &c, def, err
}

// PutOpenwopWorkflow stores w's definition def (OpenwopDefinition),
// replacing the tenant's of the same id.
func PutOpenwopWorkflow(ctx context.Context, tx Tx, w *host.OpenwopWorkflow, def []byte, now time.Time) error {
	_, err := tx.Exec(ctx, `INSERT INTO openwop_workflows (tenant, workflow_id, definition, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, workflow_id) DO UPDATE SET definition = excluded.definition, updated_at = excluded.updated_at`,
		w.Tenant, w.WorkflowID, string(def), host.FormatTime(now))
	return err
}

// OpenwopWorkflow reads the tenant's workflow id (host.ErrNotFound if none).
func OpenwopWorkflow(ctx context.Context, q Querier, tenant, id string) (*host.OpenwopWorkflow, error) {
	var def string
	err := q.QueryRow(ctx, `SELECT definition FROM openwop_workflows WHERE tenant = $1 AND workflow_id = $2`, TenantOr(tenant), id).Scan(&def)
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("get openwop workflow", id, host.ErrNotFound, "no workflow has this id")
	}
	if err != nil {
		return nil, err
	}
	var w host.OpenwopWorkflow
	return &w, json.Unmarshal([]byte(def), &w)
}

// MaxListedOpenwopWorkflows bounds OpenwopWorkflows.
const MaxListedOpenwopWorkflows = 1000

// OpenwopWorkflows lists the tenant's definitions by id, at most
// MaxListedOpenwopWorkflows.
func OpenwopWorkflows(ctx context.Context, q Querier, tenant string) ([]*host.OpenwopWorkflow, error) {
	rows, err := q.Query(ctx, `SELECT definition FROM openwop_workflows WHERE tenant = $1 ORDER BY workflow_id LIMIT $2`, TenantOr(tenant), MaxListedOpenwopWorkflows)
	if err != nil {
		return nil, err
	}
	ws, err := CollectRows(rows, func(row Row) (*host.OpenwopWorkflow, error) {
		var def string
		var w host.OpenwopWorkflow
		if err := row.Scan(&def); err != nil {
			return nil, err
		}
		return &w, json.Unmarshal([]byte(def), &w)
	})
	if ws == nil && err == nil {
		ws = []*host.OpenwopWorkflow{}
	}
	return ws, err
}

// CreateRun stores the new run r (its tenant set, created at now) and
// its first events.
func CreateRun(ctx context.Context, tx Tx, r *host.Run, evs []host.RunEvent, now time.Time) error {
	r.Tenant = TenantOr(r.Tenant)
	r.CreatedAt, r.UpdatedAt = now, now
	rec, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO openwop_runs (run_id, tenant, status, record, holder, lease_until) VALUES ($1, $2, $3, $4, $5, $6)`,
		r.RunID, r.Tenant, r.Status, string(rec), r.Holder, LeaseMillis(r.LeaseUntil)); err != nil {
		return err
	}
	return appendRunEvents(ctx, tx, r.RunID, 0, evs, now)
}

// LoadRun reads the tenant's run (host.ErrNotFound if none); lock
// (Dialect.LockRows, or "" for a read) ends the query.
func LoadRun(ctx context.Context, q Querier, lock, tenant, runID string) (*host.Run, error) {
	var rec string
	var lease int64
	var r host.Run
	err := q.QueryRow(ctx, `SELECT record, holder, lease_until FROM openwop_runs WHERE run_id = $1 AND tenant = $2`+lock,
		runID, TenantOr(tenant)).Scan(&rec, &r.Holder, &lease)
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("get run", runID, host.ErrNotFound, "no run has this id")
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(rec), &r); err != nil {
		return nil, err
	}
	r.LeaseUntil = LeaseTime(lease)
	return &r, nil
}

// AdvanceRun sets the tenant's run's status (if status is not "") and
// appends evs (see host.Runs.AdvanceRun). The run's row is locked:
// advances of one run from several writers take turns, and its events
// stay numbered without a gap.
func AdvanceRun(ctx context.Context, tx Tx, tenant, runID, holder, status string, rerr *host.RunError, evs []host.RunEvent, now time.Time) (*host.Run, error) {
	r, err := LoadRun(ctx, tx, tx.Dialect().LockRows, tenant, runID)
	if err != nil {
		return nil, err
	}
	if err := CheckRunAdvance(r, holder); err != nil {
		return nil, err
	}
	if status != "" {
		r.Status, r.Error, r.UpdatedAt = status, rerr, now
		rec, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `UPDATE openwop_runs SET status = $1, record = $2 WHERE run_id = $3`, r.Status, string(rec), r.RunID); err != nil {
			return nil, err
		}
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM openwop_run_events WHERE run_id = $1`, runID).Scan(&n); err != nil {
		return nil, err
	}
	return r, appendRunEvents(ctx, tx, runID, n, evs, now)
}

// ResumeRun takes the tenant's run waiting for a person back to running,
// held by holder until until, and appends evs (see host.Runs.ResumeRun).
// The run's row is locked, so of two resolutions at once the second
// reads the run running and is refused.
func ResumeRun(ctx context.Context, tx Tx, tenant, runID, holder string, until time.Time, evs []host.RunEvent, now time.Time) (*host.Run, error) {
	r, err := LoadRun(ctx, tx, tx.Dialect().LockRows, tenant, runID)
	if err != nil {
		return nil, err
	}
	if r.Status != host.RunWaitingApproval {
		return nil, host.Errorf("resume run", runID, host.ErrConflict, "the run is %s, not waiting for an interrupt to be resolved", r.Status)
	}
	r.Status, r.UpdatedAt, r.Holder, r.LeaseUntil = host.RunRunning, now, holder, until
	rec, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE openwop_runs SET status = $1, record = $2, holder = $3, lease_until = $4 WHERE run_id = $5`,
		r.Status, string(rec), holder, LeaseMillis(until), r.RunID); err != nil {
		return nil, err
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM openwop_run_events WHERE run_id = $1`, runID).Scan(&n); err != nil {
		return nil, err
	}
	return r, appendRunEvents(ctx, tx, runID, n, evs, now)
}

// RunEvents lists the tenant's run's events in order.
func RunEvents(ctx context.Context, q Querier, tenant, runID string) ([]host.RunEvent, error) {
	if _, err := LoadRun(ctx, q, "", tenant, runID); err != nil {
		return nil, err
	}
	rows, err := q.Query(ctx, `SELECT event FROM openwop_run_events WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	evs, err := CollectRows(rows, func(row Row) (host.RunEvent, error) {
		var b string
		var e host.RunEvent
		if err := row.Scan(&b); err != nil {
			return e, err
		}
		return e, json.Unmarshal([]byte(b), &e)
	})
	if evs == nil && err == nil {
		evs = []host.RunEvent{}
	}
	return evs, err
}

// ClaimRuns leases to holder, until until, the unfinished runs whose
// lease ended by expired, in the order they were created: one statement,
// whose rows another writer claiming at the same time skips
// (Dialect.SkipLocked; a run a writer is advancing, its row locked, waits
// for the next claim).
func ClaimRuns(ctx context.Context, tx Tx, holder string, expired, until time.Time) ([]*host.Run, error) {
	if holder == "" {
		return nil, host.Invalid("claim runs", "holder", "required")
	}
	d := tx.Dialect()
	rows, err := tx.Query(ctx, `UPDATE openwop_runs SET holder = $1, lease_until = $2
		WHERE run_id IN (SELECT run_id FROM openwop_runs WHERE `+runClaimable+` AND lease_until <= $3 ORDER BY `+d.RunOrder+d.SkipLocked+`)
		RETURNING `+d.RunOrder+`, record, holder, lease_until`,
		holder, LeaseMillis(until), expired.UnixMilli())
	if err != nil {
		return nil, err
	}
	type claimed struct {
		seq int64
		r   *host.Run
	}
	got, err := CollectRows(rows, func(row Row) (claimed, error) {
		var rec string
		var lease int64
		c := claimed{r: &host.Run{}}
		if err := row.Scan(&c.seq, &rec, &c.r.Holder, &lease); err != nil {
			return c, err
		}
		c.r.LeaseUntil = LeaseTime(lease)
		return c, json.Unmarshal([]byte(rec), c.r)
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(got, func(i, j int) bool { return got[i].seq < got[j].seq })
	out := make([]*host.Run, len(got))
	for i, c := range got {
		out[i] = c.r
	}
	return out, nil
}

// RenewRuns extends to until the leases holder holds on unfinished runs,
// and says how many.
func RenewRuns(ctx context.Context, tx Tx, holder string, until time.Time) (int, error) {
	n, err := tx.Exec(ctx, `UPDATE openwop_runs SET lease_until = $1 WHERE holder = $2 AND `+runUnfinished, LeaseMillis(until), holder)
	return int(n), err
}

// appendRunEvents numbers evs from next and stores them.
func appendRunEvents(ctx context.Context, tx Tx, runID string, next int, evs []host.RunEvent, now time.Time) error {
	NumberRunEvents(runID, next, evs, now)
	for i := range evs {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO openwop_run_events (run_id, seq, event) VALUES ($1, $2, $3)`, runID, evs[i].Seq, string(b)); err != nil {
			return err
		}
	}
	return nil
}

// CreateRunOnce is CreateRun under the tenant's idempotency key k (see
// host.Runs.CreateRunOnce): a key held, not expired, by a request of the
// same digest answers its run and stores nothing; of another digest,
// host.ErrIdempotencyMismatch. An expired key is taken again. The key's
// row is inserted first, so of two requests racing with one key the
// second waits for the first and then reads its run.
func CreateRunOnce(ctx context.Context, tx Tx, r *host.Run, evs []host.RunEvent, k host.RunIdempotency, now time.Time) (*host.Run, bool, error) {
	tenant := TenantOr(r.Tenant)
	if _, err := tx.Exec(ctx, `DELETE FROM openwop_run_idempotency WHERE tenant = $1 AND idem_key = $2 AND expires_at <= $3`,
		tenant, k.Key, now.UnixMilli()); err != nil {
		return nil, false, err
	}
	n, err := tx.Exec(ctx, `INSERT INTO openwop_run_idempotency (tenant, idem_key, digest, run_id, expires_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, idem_key) DO NOTHING`, tenant, k.Key, k.Digest, r.RunID, now.Add(k.TTL).UnixMilli())
	if err != nil {
		return nil, false, err
	}
	if n == 0 {
		var digest, runID string
		if err := tx.QueryRow(ctx, `SELECT digest, run_id FROM openwop_run_idempotency WHERE tenant = $1 AND idem_key = $2`, tenant, k.Key).Scan(&digest, &runID); err != nil {
			return nil, false, err
		}
		if digest != k.Digest {
			return nil, false, host.Errorf("start run", k.Key, host.ErrIdempotencyMismatch, "Idempotency-Key %q was used with another request body", k.Key)
		}
		run, err := LoadRun(ctx, tx, "", tenant, runID)
		return run, false, err
	}
	return r, true, CreateRun(ctx, tx, r, evs, now)
}
