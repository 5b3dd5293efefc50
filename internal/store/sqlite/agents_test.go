package sqlite

import (
	"errors"
	"testing"

	"github.com/packrun/packrun/host"
)

func eventsOf(t *testing.T, s *Store, typ string) []*host.Event {
	t.Helper()
	evs, err := s.Events(ctx, host.EventFilter{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Agents, profiles and task type specs are stored whole, replaced on
// re-add, each change an event in the chain.
func TestAgentConfigStored(t *testing.T) {
	f := newFixture(t, Options{})
	rec := &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}
	if replaced, err := f.PutAgent(ctx, rec); err != nil || replaced {
		t.Fatalf("put: %v %v", replaced, err)
	}
	rec.Agent.DisplayName = "Arc 2"
	if replaced, err := f.PutAgent(ctx, rec); err != nil || !replaced {
		t.Fatalf("re-put: %v %v", replaced, err)
	}
	got, err := f.another(t).Agent(ctx, "arc")
	if err != nil || got.Agent.DisplayName != "Arc 2" {
		t.Fatalf("agent %+v %v", got, err)
	}
	if _, err := f.Agent(ctx, "nope"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("missing agent: %v", err)
	}
	if list, _ := f.ListAgents(ctx); len(list) != 1 {
		t.Fatalf("agents %+v", list)
	}
	if evs := eventsOf(t, f.Store, host.EventAgentRegistered); len(evs) != 2 || string(evs[1].Data) != `{"agent_id":"arc","replaced":true}` {
		t.Fatalf("events %+v", evs)
	}

	p := &host.SubagentProfile{ProfileID: "writer", Style: "claude-like", Role: "writes", DefaultAdapterID: "echo"}
	if _, err := f.PutProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Profile(ctx, "writer"); err != nil || got.Role != "writes" {
		t.Fatalf("profile %+v %v", got, err)
	}
	if list, _ := f.ListProfiles(ctx); len(list) != 1 {
		t.Fatalf("profiles %+v", list)
	}

	spec := host.TaskTypeSpec{TaskType: "hello.t", PayloadSchemaID: "inputSchema", DefaultModel: "m"}
	if err := f.SetTaskTypeSpec(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got, err := f.TaskTypeSpec(ctx, "hello.t"); err != nil || got.DefaultModel != "m" {
		t.Fatalf("spec %+v %v", got, err)
	}
	if err := f.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "bad type!"}); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("bad task type: %v", err)
	}
	if err := f.RemoveTaskTypeSpec(ctx, "hello.t"); err != nil {
		t.Fatal(err)
	}
	if err := f.RemoveTaskTypeSpec(ctx, "hello.t"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := f.TaskTypeSpec(ctx, "hello.t"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("removed spec: %v", err)
	}
	if len(eventsOf(t, f.Store, host.EventTaskTypeSpecSet)) != 1 || len(eventsOf(t, f.Store, host.EventTaskTypeSpecRemoved)) != 1 {
		t.Fatal("spec events")
	}
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK {
		t.Fatalf("chain: %+v %v", rep, err)
	}
}

// The configuration reads are cached (the dispatcher reads a spec and the
// agents for every task), and a write by another process is seen at once:
// found and not found alike.
func TestConfigCacheCoherentAcrossStores(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	if _, err := f.TaskTypeSpec(ctx, "echo.t"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("no spec yet: %v", err)
	}
	if agents, err := f.ListAgents(ctx); err != nil || len(agents) != 0 {
		t.Fatalf("no agent yet: %v %v", agents, err)
	}
	if err := other.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "echo.t", DefaultModel: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}); err != nil {
		t.Fatal(err)
	}
	spec, err := f.TaskTypeSpec(ctx, "echo.t")
	if err != nil || spec.DefaultModel != "m1" {
		t.Fatalf("spec written by the other store: %+v %v", spec, err)
	}
	if agents, err := f.ListAgents(ctx); err != nil || len(agents) != 1 {
		t.Fatalf("agent written by the other store: %v %v", agents, err)
	}
	if err := other.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "echo.t", DefaultModel: "m2"}); err != nil {
		t.Fatal(err)
	}
	if spec, _ := f.TaskTypeSpec(ctx, "echo.t"); spec.DefaultModel != "m2" {
		t.Fatalf("replaced spec: %+v", spec)
	}
	if err := other.RemoveTaskTypeSpec(ctx, "echo.t"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.TaskTypeSpec(ctx, "echo.t"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("removed spec: %v", err)
	}
}
