package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/console"
	"github.com/packrun/packrun/internal/replay"
)

// consoleBackend is what the operator console reads and does, through the
// Host, bound to the tenant of the token it was given: another tenant's
// task or attempt is not found, as through the API.
type consoleBackend struct{ h *Host }

var _ console.Backend = consoleBackend{}

func notFoundIn(what, id string) error {
	return host.Errorf("get "+what, id, host.ErrNotFound, "no %s %s", what, id)
}

func sameTenant(a, b string) bool {
	if a == "" {
		a = host.DefaultTenant
	}
	if b == "" {
		b = host.DefaultTenant
	}
	return a == b
}

func (b consoleBackend) Packs(ctx context.Context) ([]console.PackView, error) {
	ps, err := b.h.Packs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.PackView, 0, len(ps))
	for _, p := range ps {
		rec, m, err := b.h.Pack(ctx, p.Ref())
		if err != nil {
			return nil, err
		}
		out = append(out, console.PackView{Pack: rec, Manifest: m})
	}
	return out, nil
}

func (b consoleBackend) Tasks(ctx context.Context, tenant string, f host.TaskFilter) ([]*host.TaskRecord, error) {
	f.Tenant = tenant
	return b.h.store.ListTasks(ctx, f)
}

func (b consoleBackend) Task(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	t, err := b.h.store.Task(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sameTenant(t.Tenant, tenant) {
		return nil, notFoundIn("task", id)
	}
	return t, nil
}

func (b consoleBackend) CancelTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	if _, err := b.Task(ctx, tenant, id); err != nil {
		return nil, err
	}
	return b.h.store.Cancel(ctx, id)
}

func (b consoleBackend) Attempts(ctx context.Context, tenant string, f host.AttemptFilter) ([]*host.Attempt, error) {
	f.Tenant = tenant
	return b.h.store.ListAttempts(ctx, f)
}

func (b consoleBackend) Attempt(ctx context.Context, tenant, id string) (*host.Attempt, error) {
	a, err := b.h.store.Attempt(ctx, id)
	if err != nil {
		return nil, err
	}
	if !sameTenant(a.Tenant, tenant) {
		return nil, notFoundIn("attempt", id)
	}
	return a, nil
}

func (b consoleBackend) Replay(ctx context.Context, tenant, id string) (*replay.Verdict, error) {
	if _, err := b.Attempt(ctx, tenant, id); err != nil {
		return nil, err
	}
	return b.h.Replay(ctx, id, ReplayOptions{})
}

func (b consoleBackend) Chain(ctx context.Context) (*host.ChainReport, error) {
	return b.h.VerifyChain(ctx, nil)
}

// Counts implements console.Backend: one read of the store.
func (b consoleBackend) Counts(ctx context.Context, tenant string) (*host.TenantCounts, error) {
	tc, ok := b.h.store.(host.TenantCounter)
	if !ok {
		return nil, fmt.Errorf("count tenant rows: store %T does not count them", b.h.store)
	}
	return tc.TenantCounts(ctx, tenant)
}

// Schedules implements console.Backend, as GET /v1/schedules reads them.
func (b consoleBackend) Schedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	return b.h.limited.ListSchedules(ctx, tenant)
}

// WorkflowRecords implements console.Backend, as GET
// /v1/workflow-records reads them.
func (b consoleBackend) WorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error) {
	return b.h.limited.ListWorkflowRecords(ctx, f)
}

// workflowScan bounds how many workflow_transitioned events after a
// record's creation its page reads to find the record's own.
const workflowScan = 5000

// WorkflowRecord implements console.Backend: the record as GET
// /v1/workflow-records/{id} reads it, its definition, and its
// workflow_transitioned events, found among the tenant's from the
// record's creation on (the log has no index by record).
func (b consoleBackend) WorkflowRecord(ctx context.Context, tenant, id string) (*console.WorkflowView, error) {
	rec, err := b.h.limited.WorkflowRecord(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	v := &console.WorkflowView{Record: rec}
	if v.Definition, err = b.h.limited.Workflow(ctx, rec.WorkflowType); err != nil && !errors.Is(err, host.ErrNotFound) {
		return nil, err
	}
	f := host.EventFilter{Type: host.EventWorkflowTransitioned, Tenant: storeTenant(rec.Tenant), Since: rec.CreatedAt, Limit: 1000}
	for read := 0; rec.Transitions > len(v.Transitions); {
		if read >= workflowScan {
			v.Partial = true
			break
		}
		evs, err := b.h.store.Events(ctx, f)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			var d struct {
				WorkflowID string `json:"workflow_id"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.WorkflowID == rec.WorkflowID {
				v.Transitions = append(v.Transitions, e)
			}
		}
		if len(evs) < f.Limit {
			break
		}
		read += len(evs)
		f.AfterSeq, f.Since = evs[len(evs)-1].Seq, time.Time{}
	}
	return v, nil
}

func storeTenant(t string) string {
	if t == "" {
		return host.DefaultTenant
	}
	return t
}

// Events implements console.Backend, as GET /v1/events reads them.
func (b consoleBackend) Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error) {
	return b.h.limited.Events(ctx, f)
}

var (
	_ console.TaskRetrier = consoleBackend{}
	_ console.TaskResumer = consoleBackend{}
)

// RetryTask implements console.TaskRetrier: the task queued again, asked
// for by the console's token.
func (b consoleBackend) RetryTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	by, err := b.askedBy(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	t, err := b.h.store.Retry(ctx, id, by)
	b.h.wake()
	return t, err
}

// ResumeTask implements console.TaskResumer.
func (b consoleBackend) ResumeTask(ctx context.Context, tenant, id string, value json.RawMessage) (*host.TaskRecord, error) {
	by, err := b.askedBy(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	t, err := b.h.store.Resume(ctx, id, value, by)
	b.h.wake()
	return t, err
}

// askedBy checks that the task is the tenant's and names who asks:
// "console:<token id> (<name>)".
func (b consoleBackend) askedBy(ctx context.Context, tenant, id string) (string, error) {
	if _, err := b.Task(ctx, tenant, id); err != nil {
		return "", err
	}
	if p := auth.From(ctx); p != nil && p.TokenID != "" {
		return fmt.Sprintf("console:%s (%s)", p.TokenID, p.Name), nil
	}
	return "console", nil
}

var _ console.MessageReader = consoleBackend{}

// Messages implements console.MessageReader: the tenant's messages.
func (b consoleBackend) Messages(ctx context.Context, tenant string, q host.MessageQuery) (*host.MessagePage, error) {
	q.Tenant = tenant
	return b.h.Messages(ctx, q)
}

// Message implements console.MessageReader.
func (b consoleBackend) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	return b.h.store.Message(ctx, tenant, id)
}

// RenderMessage implements console.MessageReader.
func (b consoleBackend) RenderMessage(rec *host.MessageRecord, format string) ([]byte, []string, error) {
	m, err := RenderMessage(rec, format)
	if err != nil {
		return nil, nil, err
	}
	return m.Document, m.Lost, nil
}
