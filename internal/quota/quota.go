package quota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/ratelimit"
)

// The quotas' names, as refusals, workflow_blocked reasons and /metrics
// call them.
const (
	Schedules           = "schedules"
	ScheduleMinInterval = "schedule_min_interval"
	ActiveWorkflows     = "active_workflows"
	WorkflowSteps       = "workflow_steps"
	QueuedTasks         = "queued_tasks"
	SensorEvents        = "sensor_events_per_minute"
	Messages            = "messages_per_minute"
)

// Names lists every quota, in the order /metrics reports them.
var Names = []string{Schedules, ScheduleMinInterval, ActiveWorkflows, WorkflowSteps, QueuedTasks, SensorEvents, Messages}

// Flag is the `packrun serve` flag that sets quota name.
func Flag(name string) string { return "--quota-" + strings.ReplaceAll(name, "_", "-") }

// Limits are the quotas of every tenant. In a Limits given to New, 0 is
// the default (Defaults) and a negative value no limit at all.
type Limits struct {
	// Schedules caps a tenant's schedules.
	Schedules int
	// ScheduleMinInterval is the shortest interval a tenant's schedule
	// may have (whole seconds).
	ScheduleMinInterval time.Duration
	// ActiveWorkflows caps a tenant's active workflow records.
	ActiveWorkflows int
	// WorkflowSteps caps the state transitions of one workflow record:
	// the one past it blocks the record instead.
	WorkflowSteps int
	// QueuedTasks caps a tenant's unfinished tasks (pending, running,
	// waiting for a retry, blocked).
	QueuedTasks int
	// SensorEventsPerMinute caps the sensor events a tenant posts a
	// minute.
	SensorEventsPerMinute int
	// MessagesPerMinute caps the agent messages a tenant publishes a
	// minute.
	MessagesPerMinute int
}

// Defaults are the limits a zero field stands for.
var Defaults = Limits{
	Schedules:             100,
	ScheduleMinInterval:   time.Second,
	ActiveWorkflows:       1000,
	WorkflowSteps:         100,
	QueuedTasks:           10000,
	SensorEventsPerMinute: 600,
	MessagesPerMinute:     600,
}

// resolved is l with its defaults applied; 0 then means no limit.
func (l Limits) resolved() Limits {
	pick := func(v, d int) int {
		switch {
		case v == 0:
			return d
		case v < 0:
			return 0
		}
		return v
	}
	r := Limits{
		Schedules: pick(l.Schedules, Defaults.Schedules), ActiveWorkflows: pick(l.ActiveWorkflows, Defaults.ActiveWorkflows),
		WorkflowSteps: pick(l.WorkflowSteps, Defaults.WorkflowSteps), QueuedTasks: pick(l.QueuedTasks, Defaults.QueuedTasks),
		SensorEventsPerMinute: pick(l.SensorEventsPerMinute, Defaults.SensorEventsPerMinute),
		MessagesPerMinute:     pick(l.MessagesPerMinute, Defaults.MessagesPerMinute),
		ScheduleMinInterval:   l.ScheduleMinInterval,
	}
	switch {
	case l.ScheduleMinInterval == 0:
		r.ScheduleMinInterval = Defaults.ScheduleMinInterval
	case l.ScheduleMinInterval < 0:
		r.ScheduleMinInterval = 0
	}
	return r
}

// limit is the limit of quota name (0: none).
func (l Limits) limit(name string) int64 {
	switch name {
	case Schedules:
		return int64(l.Schedules)
	case ScheduleMinInterval:
		return int64(l.ScheduleMinInterval / time.Second)
	case ActiveWorkflows:
		return int64(l.ActiveWorkflows)
	case WorkflowSteps:
		return int64(l.WorkflowSteps)
	case QueuedTasks:
		return int64(l.QueuedTasks)
	case SensorEvents:
		return int64(l.SensorEventsPerMinute)
	case Messages:
		return int64(l.MessagesPerMinute)
	}
	return 0
}

// ErrExceeded is what every refusal of a quota Is.
var ErrExceeded = errors.New("quota exceeded")

// Error refuses something a quota does not allow; nothing was stored.
type Error struct {
	// Quota names the quota (Schedules...); Limit is its limit.
	Quota string
	Limit int64
	// Tenant is the tenant refused.
	Tenant string
	// RetryAfter, for a rate, is when the next one is allowed.
	RetryAfter time.Duration
	msg        string
}

func (e *Error) Error() string { return e.msg }

// Rate reports whether the quota is a rate (an HTTP 429) rather than a
// count (409).
func (e *Error) Rate() bool { return e.Quota == SensorEvents || e.Quota == Messages }

// Is makes an Error ErrExceeded and, as a refusal of the current state,
// host.ErrConflict.
func (e *Error) Is(target error) bool { return target == ErrExceeded || target == host.ErrConflict }

func (k *Keeper) refuse(name, tenant, what string) *Error {
	k.refusals[index(name)].Add(1)
	lim := k.lim.limit(name)
	return &Error{Quota: name, Limit: lim, Tenant: tenant,
		msg: fmt.Sprintf("quota %s exceeded: tenant %s %s (raise it with packrun serve %s)", name, tenant, what, Flag(name))}
}

func index(name string) int {
	for i, n := range Names {
		if n == name {
			return i
		}
	}
	panic("quota: unknown quota " + name)
}

// Refresh is how old the store's counts may get before a check reads
// them again.
const Refresh = time.Second

// Keeper checks the quotas of every tenant. Counts are the store's
// (host.UsageCounter, read at most once a Refresh, all tenants at once)
// plus what this Keeper let through since; rates are token buckets in
// memory. It implements host.StoreQuotas. It is safe for concurrent use.
type Keeper struct {
	lim   Limits
	count func(ctx context.Context) (map[string]host.TenantUsage, error)
	now   func() time.Time

	reading sync.Mutex // one read of the counts at a time
	mu      sync.Mutex
	base    map[string]host.TenantUsage // as last read (nil: never)
	delta   map[string]host.TenantUsage // let through since
	readAt  time.Time
	buckets ratelimit.Buckets // quota + "\x00" + tenant

	refusals [7]atomic.Uint64 // by index in Names
}

var _ host.StoreQuotas = (*Keeper)(nil)

// New returns a Keeper of lim (its zero fields the defaults) reading the
// counts with count.
func New(lim Limits, count func(ctx context.Context) (map[string]host.TenantUsage, error)) *Keeper {
	return &Keeper{lim: lim.resolved(), count: count, now: time.Now, delta: map[string]host.TenantUsage{}}
}

// Limits returns the limits in force (0: none).
func (k *Keeper) Limits() Limits { return k.lim }

// fresh reads the counts if they are older than Refresh.
func (k *Keeper) fresh(ctx context.Context) error {
	stale := func() bool { return k.base == nil || k.now().Sub(k.readAt) >= Refresh }
	k.mu.Lock()
	s := stale()
	k.mu.Unlock()
	if !s {
		return nil
	}
	k.reading.Lock()
	defer k.reading.Unlock()
	k.mu.Lock()
	if !stale() {
		k.mu.Unlock()
		return nil
	}
	before := make(map[string]host.TenantUsage, len(k.delta))
	for t, u := range k.delta {
		before[t] = u
	}
	k.mu.Unlock()
	counts, err := k.count(ctx)
	if err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// What was let through before the read is in the counts now.
	for t, b := range before {
		d := k.delta[t]
		d.Schedules -= b.Schedules
		d.ActiveWorkflows -= b.ActiveWorkflows
		d.QueuedTasks -= b.QueuedTasks
		if d == (host.TenantUsage{}) {
			delete(k.delta, t)
		} else {
			k.delta[t] = d
		}
	}
	k.base, k.readAt = counts, k.now()
	return nil
}

// Refresh reads the store's counts now if they are older than Refresh:
// the host calls it before firing schedules, so that ScheduleSlot (which
// may not read) sees a queue drained since.
func (k *Keeper) Refresh(ctx context.Context) error { return k.fresh(ctx) }

// field returns a pointer to quota name's count in u.
func field(u *host.TenantUsage, name string) *int {
	switch name {
	case Schedules:
		return &u.Schedules
	case ActiveWorkflows:
		return &u.ActiveWorkflows
	}
	return &u.QueuedTasks
}

// usage is tenant's count of name; k.mu held.
func (k *Keeper) usage(tenant, name string) int {
	b, d := k.base[tenant], k.delta[tenant]
	return *field(&b, name) + *field(&d, name)
}

// add adds n to tenant's count of name; k.mu held.
func (k *Keeper) add(tenant, name string, n int) {
	d := k.delta[tenant]
	*field(&d, name) += n
	k.delta[tenant] = d
}

// take lets n more of count quota name through for tenant, or refuses.
// what describes the refusal. The caller gives them back (Release) if
// its write fails.
func (k *Keeper) take(ctx context.Context, tenant, name string, n int, what string) error {
	lim := int(k.lim.limit(name))
	if lim == 0 {
		return nil
	}
	if err := k.fresh(ctx); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if have := k.usage(tenant, name); have+n > lim {
		return k.refuse(name, tenant, fmt.Sprintf("has %d %s; the limit is %d", have, what, lim))
	}
	k.add(tenant, name, n)
	return nil
}

// Release gives back n of count quota name that tenant took but did not
// store, or that it removed (a schedule deleted, a record canceled).
func (k *Keeper) Release(tenant, name string, n int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.add(tenant, name, -n)
}

// Schedule checks a new schedule of tenant with that interval (seconds),
// and counts it.
func (k *Keeper) Schedule(ctx context.Context, tenant string, intervalSeconds int64) error {
	if err := k.ScheduleInterval(tenant, intervalSeconds); err != nil {
		return err
	}
	return k.take(ctx, tenant, Schedules, 1, "schedules")
}

// ScheduleInterval checks a schedule interval (seconds) of tenant.
func (k *Keeper) ScheduleInterval(tenant string, intervalSeconds int64) error {
	if min := k.lim.ScheduleMinInterval; min > 0 && time.Duration(intervalSeconds)*time.Second < min {
		return k.refuse(ScheduleMinInterval, tenant, fmt.Sprintf("asked for a schedule every %ds; the shortest interval is %ds", intervalSeconds, int64(min/time.Second)))
	}
	return nil
}

// Workflow checks a new active workflow record of tenant, and counts it.
func (k *Keeper) Workflow(ctx context.Context, tenant string) error {
	return k.take(ctx, tenant, ActiveWorkflows, 1, "active workflow records")
}

// Tasks checks n new tasks of tenant, and counts them.
func (k *Keeper) Tasks(ctx context.Context, tenant string, n int) error {
	return k.take(ctx, tenant, QueuedTasks, n, "unfinished tasks")
}

// SensorEvent takes one sensor event of tenant from its minute's
// allowance, or refuses.
func (k *Keeper) SensorEvent(tenant string) error {
	return k.rate(tenant, SensorEvents, "sensor events")
}

// Message takes one message of tenant from its minute's allowance, or
// refuses.
func (k *Keeper) Message(tenant string) error { return k.rate(tenant, Messages, "messages") }

// rate takes one of tenant's allowance of rate quota name: up to a
// minute's at once, refilled evenly over the minute.
func (k *Keeper) rate(tenant, name, what string) error {
	perMin := float64(k.lim.limit(name))
	if perMin == 0 {
		return nil
	}
	ok, wait := k.buckets.Take(name+"\x00"+tenant, k.now(), perMin/60, perMin)
	if ok {
		return nil
	}
	e := k.refuse(name, tenant, fmt.Sprintf("sent more than %d %s in a minute", int64(perMin), what))
	e.RetryAfter = wait
	return e
}

// WorkflowStep implements host.StoreQuotas: a record that made
// WorkflowSteps transitions makes no more.
func (k *Keeper) WorkflowStep(r *host.WorkflowRecord) error {
	if lim := k.lim.WorkflowSteps; lim > 0 && r.Transitions >= lim {
		return k.refuse(WorkflowSteps, r.Tenant, fmt.Sprintf("record %s made %d transitions; the limit is %d", r.WorkflowID, r.Transitions, lim))
	}
	return nil
}

// ScheduleSlot implements host.StoreQuotas: a tenant at its
// QueuedTasks gets no task from a schedule (by the counts last read;
// Refresh reads them first). A slot let through is counted.
func (k *Keeper) ScheduleSlot(tenant string) error {
	lim := k.lim.QueuedTasks
	if lim == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if have := k.usage(tenant, QueuedTasks); have >= lim {
		return k.refuse(QueuedTasks, tenant, fmt.Sprintf("has %d unfinished tasks; the limit is %d: the schedule's slot is skipped", have, lim))
	}
	k.add(tenant, QueuedTasks, 1)
	return nil
}

// Usage is one quota's state across tenants, for /metrics: no tenant is
// named.
type Usage struct {
	Quota string
	Limit int64 // 0: none
	// Ratio is the highest usage over the limit among the tenants, as
	// last read (counts only; 0 for rates and limits none).
	Ratio float64
	// Refusals counts the refusals since the Keeper was made.
	Refusals uint64
}

// Usage reports every quota, in the order of Names.
func (k *Keeper) Usage() []Usage {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]Usage, len(Names))
	for i, name := range Names {
		u := Usage{Quota: name, Limit: k.lim.limit(name), Refusals: k.refusals[i].Load()}
		if u.Limit > 0 && (name == Schedules || name == ActiveWorkflows || name == QueuedTasks) {
			for t := range k.base {
				u.Ratio = max(u.Ratio, float64(k.usage(t, name))/float64(u.Limit))
			}
			for t := range k.delta {
				u.Ratio = max(u.Ratio, float64(k.usage(t, name))/float64(u.Limit))
			}
		}
		out[i] = u
	}
	return out
}
