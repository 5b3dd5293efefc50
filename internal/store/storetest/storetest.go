package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// Opener opens a fresh, empty store whose notion of now is clock.Now, and
// closes it when t ends (t.Cleanup). Every subtest opens its own.
type Opener func(t testing.TB, clock *Clock) host.Backend

// Clock is a controllable clock. It starts at Epoch and moves only when
// a test moves it, always by whole milliseconds, so that a backend that
// keeps microseconds (PostgreSQL's timestamptz) holds its times exactly.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Epoch is where every Clock starts: 2026-03-01T12:00:00Z.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{t: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Add moves the clock by d and returns the new time.
func (c *Clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t.UTC()
}

// Area is one area of the contract: a store interface of host.Backend
// and the function that checks it.
type Area struct {
	Name string
	Run  func(*testing.T, Opener)
}

// Areas lists every area of the contract, in the order All runs them.
var Areas = []Area{
	{"Queue", Queue}, {"Evidence", Evidence}, {"Memory", Memory}, {"Locker", Locker},
	{"Schedules", Schedules}, {"Sensors", Sensors}, {"Messages", Messages},
	{"TaskTypes", TaskTypes}, {"TaskTypeSpecs", TaskTypeSpecs}, {"Agents", Agents},
	{"Packs", Packs}, {"Workflows", Workflows}, {"Runs", Runs},
	{"Tokens", Tokens},
	{"EvidenceLog", EvidenceLog},
}

// All runs every area of the contract, each as a subtest, in parallel
// with the others (go test -parallel bounds how many at once): every
// scenario opens its own store on its own clock, and the suite's package
// state (Epoch, the scenario tables) is read only.
func All(t *testing.T, open Opener) {
	for _, a := range Areas {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			a.Run(t, open)
		})
	}
}

var ctx = context.Background()

// fixture is one fresh store and its clock, for one subtest.
type fixture struct {
	t     *testing.T
	b     host.Backend
	clock *Clock
}

// scenario is a named subtest of an area.
type scenario struct {
	name string
	run  func(f *fixture)
}

// runAll runs each scenario as a parallel subtest on a fresh store of its
// own (an Opener must not share one between calls). After each, the
// store's evidence chain must verify, and every event read back must be
// hashed and linked as internal/evidence says (checkEvents).
func runAll(t *testing.T, open Opener, scenarios []scenario) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open)
			sc.run(f)
			if !t.Failed() {
				f.verifyChain()
				f.checkEvents()
			}
		})
	}
}

func newFixture(t *testing.T, open Opener) *fixture {
	t.Helper()
	c := NewClock()
	return &fixture{t: t, b: open(t, c), clock: c}
}

// verifyChain checks that the whole chain verifies and returns the report.
func (f *fixture) verifyChain() *host.ChainReport {
	f.t.Helper()
	rep, err := f.b.VerifyChain(ctx)
	if err != nil {
		f.t.Fatalf("VerifyChain: %v", err)
	}
	if !rep.OK || rep.Broken != nil {
		f.t.Fatalf("VerifyChain: not OK: %+v (broken %+v)", rep, rep.Broken)
	}
	return rep
}

// intent is a valid intent of taskType.
func intent(taskType string, prio *int) host.TaskIntent {
	return host.TaskIntent{TaskType: taskType, Source: "test", Priority: prio, Payload: json.RawMessage(`{"n":1}`)}
}

func okOutcome() host.TaskOutcome {
	return host.TaskOutcome{MachineStatus: host.MachineOK, OperatorSummary: "done"}
}

func (f *fixture) enqueue(in host.TaskIntent, opts host.EnqueueOptions) *host.TaskRecord {
	f.t.Helper()
	rec, err := f.b.Enqueue(ctx, in, opts)
	if err != nil {
		f.t.Fatalf("enqueue: %v", err)
	}
	return rec
}

// claim claims the next task available now as runner-1.
func (f *fixture) claim() *host.TaskRecord {
	f.t.Helper()
	rec, err := f.b.Claim(ctx, "runner-1", f.clock.Now())
	if err != nil {
		f.t.Fatalf("claim: %v", err)
	}
	return rec
}

// newAttempt is an attempt of a claimed task, not recorded yet.
func newAttempt(task *host.TaskRecord) *host.Attempt {
	return &host.Attempt{
		TaskID: task.TaskID, Pack: "local.test@1.0.0", ModuleSHA256: "ab12", Node: "test.node", RunID: "run-" + task.TaskID,
		Tenant: task.Tenant, Attempt: task.AttemptCount, ABIVersion: "1.0", Input: task.Payload, Output: json.RawMessage(`{"ok":true}`),
		Outcome: abi.Completed, Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`),
	}
}

// record records an attempt of a claimed task.
func (f *fixture) record(task *host.TaskRecord) *host.Attempt {
	f.t.Helper()
	a := newAttempt(task)
	if err := f.b.RecordAttempt(ctx, a); err != nil {
		f.t.Fatalf("record attempt: %v", err)
	}
	return a
}

// finish records an attempt for a claimed task and finishes it with in.
func (f *fixture) finish(task *host.TaskRecord, in host.FinishInput) *host.TaskRecord {
	f.t.Helper()
	in.AttemptID = f.record(task).AttemptID
	rec, err := f.b.Finish(ctx, task.TaskID, in)
	if err != nil {
		f.t.Fatalf("finish: %v", err)
	}
	return rec
}

// task reads one task.
func (f *fixture) task(id string) *host.TaskRecord {
	f.t.Helper()
	rec, err := f.b.Task(ctx, id)
	if err != nil {
		f.t.Fatalf("task %s: %v", id, err)
	}
	return rec
}

// tasks lists every task (up to 1000).
func (f *fixture) tasks(filter host.TaskFilter) []*host.TaskRecord {
	f.t.Helper()
	if filter.Limit == 0 {
		filter.Limit = 1000
	}
	all, err := f.b.ListTasks(ctx, filter)
	if err != nil {
		f.t.Fatalf("list tasks: %v", err)
	}
	return all
}

// events lists the events filter selects.
func (f *fixture) events(filter host.EventFilter) []*host.Event {
	f.t.Helper()
	evs, err := f.b.Events(ctx, filter)
	if err != nil {
		f.t.Fatalf("events: %v", err)
	}
	return evs
}

// eventTypes lists the types of a task's events ("" : every event), in
// chain order.
func (f *fixture) eventTypes(taskID string) []string {
	f.t.Helper()
	var out []string
	for _, e := range f.events(host.EventFilter{TaskID: taskID}) {
		out = append(out, e.Type)
	}
	return out
}

// countEvents counts the chain's events of each type.
func (f *fixture) countEvents() map[string]int {
	f.t.Helper()
	n := map[string]int{}
	for _, e := range f.events(host.EventFilter{Limit: 100000}) {
		n[e.Type]++
	}
	return n
}

// wantTypes fails unless got is want.
func (f *fixture) wantTypes(what string, got []string, want ...string) {
	f.t.Helper()
	if !reflect.DeepEqual(got, want) {
		f.t.Fatalf("%s: events\n%v\nwant\n%v", what, got, want)
	}
}

// eventData decodes an event's data.
func eventData(t testing.TB, e *host.Event) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(e.Data, &d); err != nil {
		t.Fatalf("event %s data %s: %v", e.Type, e.Data, err)
	}
	return d
}

// wantErr fails unless err matches kind.
func wantErr(t testing.TB, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v, want %v", err, kind)
	}
}

// wantField fails unless err is a validation *host.Error naming field.
func wantField(t testing.TB, err error, field string) {
	t.Helper()
	var he *host.Error
	if !errors.As(err, &he) || !errors.Is(err, host.ErrValidation) || he.Field != field {
		t.Fatalf("error %v, want a validation error naming %q", err, field)
	}
}

// route serves taskType with pack's node.
func (f *fixture) route(pack, taskType, node string) {
	f.t.Helper()
	if err := f.b.SetPackTaskTypes(ctx, pack, []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: taskType}, Pack: pack, Node: node}}); err != nil {
		f.t.Fatal(err)
	}
}
