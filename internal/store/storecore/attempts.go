package storecore

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// AttemptWhere is the WHERE clause of f, its arguments added to a.
func AttemptWhere(f host.AttemptFilter, a *Args, d *Dialect) string {
	q := ` WHERE ` + d.True + d.Placed()
	if f.TaskID != "" {
		q += ` AND task_id = ` + a.Add(f.TaskID)
	}
	if f.TaskType != "" {
		q += ` AND task_id IN (SELECT task_id FROM tasks WHERE task_type = ` + a.Add(f.TaskType) + `)`
	}
	if f.BeforeSeq != 0 {
		q += ` AND seq < ` + a.Add(f.BeforeSeq)
	}
	if f.Pack != "" {
		if strings.Contains(f.Pack, "@") {
			q += ` AND pack = ` + a.Add(f.Pack)
		} else {
			q += ` AND ` + d.HasPrefix("pack", f.Pack+"@", a)
		}
	}
	if f.Tenant != "" {
		q += ` AND tenant = ` + a.Add(f.Tenant)
	}
	if !f.Since.IsZero() {
		q += ` AND started_at >= ` + a.Add(host.FormatTime(f.Since))
	}
	return q
}

// GetAttempt is host.Evidence.Attempt.
func GetAttempt(ctx context.Context, q Querier, read ValueReader, attemptID string) (*host.Attempt, error) {
	var seq int64
	var rec []byte
	err := q.QueryRow(ctx, `SELECT seq, record FROM attempt_records WHERE attempt_id = $1`, attemptID).Scan(&seq, &rec)
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("get attempt", attemptID, host.ErrNotFound, "")
	}
	if err != nil {
		return nil, host.Wrap("get attempt", attemptID, err)
	}
	a, err := DecodeAttempt(ctx, read, max(seq, 0), rec) // 0: pending, not linked yet (Dialect.Pending)
	return a, host.Wrap("get attempt", attemptID, err)
}

// CountAttempts is host.Evidence.CountAttempts.
func CountAttempts(ctx context.Context, q Querier, d *Dialect, f host.AttemptFilter) (int, error) {
	var a Args
	where := AttemptWhere(f, &a, d)
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM attempt_records`+where, a...).Scan(&n); err != nil {
		return 0, host.Wrap("count attempts", "", err)
	}
	return n, nil
}

// ListAttempts is host.Evidence.ListAttempts. Values are read once the
// page is: not while its rows are open.
func ListAttempts(ctx context.Context, q Querier, d *Dialect, read ValueReader, f host.AttemptFilter) ([]*host.Attempt, error) {
	var a Args
	where := AttemptWhere(f, &a, d)
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.Query(ctx, `SELECT seq, record FROM attempt_records`+where+` ORDER BY seq DESC`+LimitClause(limit), a...)
	if err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
	type row struct {
		seq int64
		rec []byte
	}
	var page []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.seq, &r.rec); err != nil {
			rows.Close()
			return nil, host.Wrap("list attempts", "", err)
		}
		page = append(page, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, host.Wrap("list attempts", "", err)
	}
	out := make([]*host.Attempt, 0, len(page))
	for _, r := range page {
		a, err := DecodeAttempt(ctx, read, r.seq, r.rec)
		if err != nil {
			return nil, host.Wrap("list attempts", "", err)
		}
		out = append(out, a)
	}
	return out, nil
}

// Exporter is what ExportAttempt reads through: the store's evidence and
// its sealing.
type Exporter struct {
	Evidence interface {
		Attempt(ctx context.Context, attemptID string) (*host.Attempt, error)
		Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error)
	}
	// Artifacts are the attempt's artifacts with their bytes, in the
	// order they were recorded.
	Artifacts func(ctx context.Context, a *host.Attempt) ([]host.BundleArtifact, error)
	Seal      func(format, digest string) (*host.Seal, error)
	Now       func() time.Time
}

// ExportAttempt is host.Evidence.ExportAttempt: the attempt, its
// artifacts with their bytes and its events, sealed.
func (x Exporter) ExportAttempt(ctx context.Context, attemptID string) (*host.Bundle, error) {
	const op = "export attempt"
	a, err := x.Evidence.Attempt(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	b := &host.Bundle{Format: host.BundleFormat, ExportedAt: x.Now(), Attempt: a, Artifacts: []host.BundleArtifact{}}
	arts, err := x.Artifacts(ctx, a)
	if err != nil {
		return nil, err
	}
	b.Artifacts = append(b.Artifacts, arts...)
	for after := int64(0); ; {
		evs, err := x.Evidence.Events(ctx, host.EventFilter{AttemptID: attemptID, AfterSeq: after, Limit: 1000})
		if err != nil {
			return nil, err
		}
		b.Events = append(b.Events, evs...)
		if len(evs) < 1000 {
			break
		}
		after = evs[len(evs)-1].Seq
	}
	digest, err := evidence.BundleDigest(b)
	if err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	if b.Seal, err = x.Seal(host.BundleFormat, digest); err != nil {
		return nil, host.Wrap(op, attemptID, err)
	}
	return b, nil
}
