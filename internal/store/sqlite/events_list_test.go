package sqlite

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storetest"
)

// task_started is appended with the settlement, carrying when the node
// started, before the attempt it describes.
func TestTaskStartedWithSettlement(t *testing.T) {
	f := newFixture(t, Options{})
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task := mustClaim(t, f.Store, f.clock.Now())
	a := attemptFor(t, f.Store, task)
	if _, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Events(ctx, host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskStarted})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", err, evs)
	}
	var d struct {
		Attempt   int    `json:"attempt"`
		RunnerID  string `json:"runner_id"`
		StartedAt string `json:"started_at"`
	}
	if err := json.Unmarshal(evs[0].Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Attempt != 1 || d.RunnerID != "runner-1" || d.StartedAt != ts(a.StartedAt) || evs[0].AttemptID != a.AttemptID {
		t.Fatalf("task_started %s (attempt started %s)", evs[0].Data, ts(a.StartedAt))
	}
}

// The migration adding runtime_events.tenant fills the tenant of the events stored before it by the
// rule the store applies as it appends one: with the column dropped and
// the migration applied again on reopening, each tenant lists what it
// listed, and the chain verifies (the tenant is not hashed).
func TestMigrationFillsEventTenants(t *testing.T) {
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "packrun.db")
	s, err := Open(ctx, path, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SeedTenantEvents(t, s, clock)
	before := storetest.CheckTenantEvents(t, s)
	version := slices.IndexFunc(migrations, func(m string) bool {
		return strings.Contains(m, "ALTER TABLE runtime_events ADD COLUMN tenant")
	}) + 1
	if version == 0 {
		t.Fatal("no migration adds runtime_events.tenant")
	}
	for _, q := range []string{`DROP INDEX runtime_events_tenant`, `ALTER TABLE runtime_events DROP COLUMN tenant`,
		`DELETE FROM schema_migrations WHERE component = 'host' AND version = ` + strconv.Itoa(version)} {
		if _, err := s.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if after := storetest.CheckTenantEvents(t, s); !reflect.DeepEqual(after, before) {
		t.Fatalf("after the migration the tenants list %v, before %v", after, before)
	}
	if rep, err := s.VerifyChain(ctx); err != nil || !rep.OK {
		t.Fatalf("chain after the migration: %+v %v", rep, err)
	}
}
