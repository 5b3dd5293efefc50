package storetest

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// TaskTypes checks host.TaskTypes: manifest routes per pack (replaced
// whole, an unchanged set a no-op, nil removing them), resolution (one
// route, none, several: a conflict naming the packs), operator overrides
// winning and removed, the listing, validation, and the events.
func TaskTypes(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"ResolveAndOverride", taskTypesResolveAndOverride},
		{"Validation", taskTypesValidation},
		{"SetupAsTheReads", taskTypesSetupAsTheReads},
	})
}

// TaskTypeSpecs checks host.TaskTypeSpecs: set (replacing), get, list,
// remove, not found, validation, and the events.
func TaskTypeSpecs(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"SetGetListRemove", taskTypeSpecsSetGetListRemove},
	})
}

// Agents checks host.Agents: agents and subagent profiles stored whole,
// replaced on re-put (and saying so), listed by id, not found, and the
// events.
func Agents(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"AgentsStoredWhole", agentsStoredWhole},
		{"Profiles", agentsProfiles},
	})
}

func manifestRoute(taskType, node string) host.TaskTypeRoute {
	return host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: taskType, DefaultModel: "m"}, Node: node}
}

func (f *fixture) resolve(taskType string) string {
	f.t.Helper()
	r, err := f.b.Resolve(ctx, taskType)
	switch {
	case errors.Is(err, host.ErrNotFound):
		return "<none>"
	case errors.Is(err, host.ErrConflict):
		return "<conflict>"
	case err != nil:
		f.t.Fatalf("resolve %s: %v", taskType, err)
	}
	return r.Origin + ":" + r.Pack + "/" + r.Node
}

// sameSetup checks, of a backend implementing host.TaskSetups, that
// TaskSetup(taskType) answers as Resolve, TaskTypeSpec and ListAgents
// do, errors included; it reports whether it checked.
func (f *fixture) sameSetup(taskType string) bool {
	t := f.t
	t.Helper()
	ts, ok := f.b.(host.TaskSetups)
	if !ok {
		return false
	}
	got, err := ts.TaskSetup(ctx, taskType)
	if err != nil {
		t.Fatal(err)
	}
	route, rerr := f.b.Resolve(ctx, taskType)
	spec, serr := f.b.TaskTypeSpec(ctx, taskType)
	agents, aerr := f.b.ListAgents(ctx)
	errText := func(err error) string {
		if err == nil {
			return "<nil>"
		}
		return err.Error()
	}
	for _, c := range []struct {
		what           string
		got, want      any
		gotErr, wantEr error
	}{{"route", got.Route, route, got.RouteErr, rerr}, {"spec", got.Spec, spec, got.SpecErr, serr}, {"agents", got.Agents, agents, got.AgentsErr, aerr}} {
		if !reflect.DeepEqual(c.got, c.want) || errText(c.gotErr) != errText(c.wantEr) {
			t.Fatalf("%s: TaskSetup's %s is %+v (%v), its own read's %+v (%v)", taskType, c.what, c.got, c.gotErr, c.want, c.wantEr)
		}
		for _, kind := range []error{host.ErrNotFound, host.ErrConflict} {
			if errors.Is(c.gotErr, kind) != errors.Is(c.wantEr, kind) {
				t.Fatalf("%s: TaskSetup's %s error %v, its own read's %v", taskType, c.what, c.gotErr, c.wantEr)
			}
		}
	}
	return true
}

// A backend's TaskSetup (host.TaskSetups, where implemented) reads what
// Resolve, TaskTypeSpec and ListAgents read: no route, one, several
// packs, an override; no spec, one; no agent, one, several.
func taskTypesSetupAsTheReads(f *fixture) {
	t := f.t
	steps := []func() error{
		func() error { return nil },
		func() error {
			return f.b.SetPackTaskTypes(ctx, "vendor.acme.a", []host.TaskTypeRoute{manifestRoute("summarize", "acme.sum"), manifestRoute("translate", "acme.tr")})
		},
		func() error {
			return f.b.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "summarize", DefaultModel: "spec-model", AllowedSkillIDs: []string{"s1"}})
		},
		func() error {
			_, err := f.b.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "zed", InternalName: "zed", DisplayName: "Zed"}})
			return err
		},
		func() error {
			return f.b.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{manifestRoute("summarize", "other.sum")})
		},
		func() error {
			_, err := f.b.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "abe", InternalName: "abe", DisplayName: "Abe"}})
			return err
		},
		func() error {
			return f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "summarize"}, Pack: "vendor.other.b", Node: "other.sum"})
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		for _, typ := range []string{"summarize", "translate", "unknown"} {
			if !f.sameSetup(typ) {
				return // not a host.TaskSetups: nothing to compare
			}
		}
	}
}

func taskTypesResolveAndOverride(f *fixture) {
	t := f.t
	if err := f.b.SetPackTaskTypes(ctx, "vendor.acme.a", []host.TaskTypeRoute{manifestRoute("summarize", "acme.sum"), manifestRoute("translate", "acme.tr")}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{manifestRoute("translate", "other.tr")}); err != nil {
		t.Fatal(err)
	}
	r, err := f.b.Resolve(ctx, "summarize")
	if err != nil || r.Pack != "vendor.acme.a" || r.Node != "acme.sum" || r.Origin != host.OriginManifest || r.TaskType != "summarize" || r.DefaultModel != "m" {
		t.Fatalf("%+v %v", r, err)
	}
	_, err = f.b.Resolve(ctx, "translate")
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), "vendor.acme.a") || !strings.Contains(err.Error(), "vendor.other.b") {
		t.Fatalf("the conflict does not name both packs: %v", err)
	}
	_, err = f.b.Resolve(ctx, "unknown")
	wantErr(t, err, host.ErrNotFound)

	// The operator override wins.
	if err := f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "translate"}, Pack: "vendor.other.b", Node: "other.tr"}); err != nil {
		t.Fatal(err)
	}
	if got := f.resolve("translate"); got != "operator:vendor.other.b/other.tr" {
		t.Fatal(got)
	}
	if err := f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "summarize"}, Pack: "local.mine", Node: "mine.sum"}); err != nil {
		t.Fatal(err)
	}
	if got := f.resolve("summarize"); got != "operator:local.mine/mine.sum" {
		t.Fatal(got)
	}
	// An override of a type nothing else serves.
	if err := f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "solo"}, Pack: "local.mine", Node: "mine.solo"}); err != nil {
		t.Fatal(err)
	}
	if got := f.resolve("solo"); got != "operator:local.mine/mine.solo" {
		t.Fatal(got)
	}
	// Feeding the same routes again is a no-op.
	before := len(f.events(host.EventFilter{}))
	if err := f.b.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{manifestRoute("translate", "other.tr")}); err != nil {
		t.Fatal(err)
	}
	if after := len(f.events(host.EventFilter{})); after != before {
		t.Fatal("unchanged routes appended an event")
	}
	// Uninstalling a pack drops its routes.
	if err := f.b.SetPackTaskTypes(ctx, "vendor.acme.a", nil); err != nil {
		t.Fatal(err)
	}
	if err := f.b.RemoveTaskTypeOverride(ctx, "translate"); err != nil {
		t.Fatal(err)
	}
	if got := f.resolve("translate"); got != "manifest:vendor.other.b/other.tr" {
		t.Fatal(got)
	}
	wantErr(t, f.b.RemoveTaskTypeOverride(ctx, "translate"), host.ErrNotFound)
	// A pack's new set replaces its old one.
	if err := f.b.SetPackTaskTypes(ctx, "vendor.other.b", []host.TaskTypeRoute{manifestRoute("translate", "other.tr2"), manifestRoute("review", "other.rev")}); err != nil {
		t.Fatal(err)
	}
	if got := f.resolve("translate"); got != "manifest:vendor.other.b/other.tr2" {
		t.Fatal(got)
	}
	all, err := f.b.ListTaskTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range all {
		got = append(got, r.TaskType+"="+r.Origin+":"+r.Pack+"/"+r.Node)
	}
	want := []string{"review=manifest:vendor.other.b/other.rev", "solo=operator:local.mine/mine.solo",
		"summarize=operator:local.mine/mine.sum", "translate=manifest:vendor.other.b/other.tr2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("list\n%v\nwant\n%v", got, want)
	}
	n := f.countEvents()
	if n[host.EventTaskTypesUpdated] != 4 || n[host.EventTaskTypeOverrideSet] != 3 || n[host.EventTaskTypeOverrideUnset] != 1 {
		t.Fatalf("events %v", n)
	}
	upd := f.events(host.EventFilter{Type: host.EventTaskTypesUpdated})
	if d := eventData(t, upd[0]); d["pack"] != "vendor.acme.a" {
		t.Fatalf("task_types_updated %s", upd[0].Data)
	}
}

func taskTypesValidation(f *fixture) {
	t := f.t
	for name, call := range map[string]func() error{
		"bad task type": func() error {
			return f.b.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{manifestRoute("bad type", "n")})
		},
		"routed twice": func() error {
			return f.b.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{manifestRoute("x", "n"), manifestRoute("x", "m")})
		},
		"no node": func() error { return f.b.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{manifestRoute("x", "")}) },
		"another pack's": func() error {
			r := manifestRoute("x", "n")
			r.Pack = "q"
			return f.b.SetPackTaskTypes(ctx, "p", []host.TaskTypeRoute{r})
		},
		"override bad type": func() error {
			return f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "a b"}, Pack: "p", Node: "n"})
		},
		"override no pack": func() error {
			return f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "x"}, Node: "n"})
		},
		"override no node": func() error {
			return f.b.SetTaskTypeOverride(ctx, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "x"}, Pack: "p"})
		},
		"no pack name given": func() error { return f.b.SetPackTaskTypes(ctx, "", []host.TaskTypeRoute{manifestRoute("x", "n")}) },
	} {
		if err := call(); !errors.Is(err, host.ErrValidation) {
			t.Fatalf("%s: %v, want a validation error", name, err)
		}
	}
	if all, err := f.b.ListTaskTypes(ctx); err != nil || len(all) != 0 {
		t.Fatalf("refused routes stored: %+v %v", all, err)
	}
}

func taskTypeSpecsSetGetListRemove(f *fixture) {
	t := f.t
	spec := host.TaskTypeSpec{TaskType: "hello.t", PayloadSchemaID: "inputSchema", DefaultModel: "m", AllowedSkillIDs: []string{"s1", "s2"},
		ArtifactRoles: []string{"plan"}, SuccessPolicy: &host.SuccessPolicy{RequireArtifacts: true}}
	if err := f.b.SetTaskTypeSpec(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got, err := f.b.TaskTypeSpec(ctx, "hello.t"); err != nil || !reflect.DeepEqual(got, spec) {
		t.Fatalf("spec %+v %v", got, err)
	}
	spec.DefaultModel, spec.SuccessPolicy = "m2", nil
	if err := f.b.SetTaskTypeSpec(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if got, err := f.b.TaskTypeSpec(ctx, "hello.t"); err != nil || !reflect.DeepEqual(got, spec) {
		t.Fatalf("replaced spec %+v %v", got, err)
	}
	if err := f.b.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "a.first"}); err != nil {
		t.Fatal(err)
	}
	list, err := f.b.ListTaskTypeSpecs(ctx)
	if err != nil || len(list) != 2 || list[0].TaskType != "a.first" || list[1].TaskType != "hello.t" || list[1].DefaultModel != "m2" {
		t.Fatalf("list %+v %v", list, err)
	}
	wantErr(t, f.b.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "bad type!"}), host.ErrValidation)
	if err := f.b.RemoveTaskTypeSpec(ctx, "hello.t"); err != nil {
		t.Fatal(err)
	}
	wantErr(t, f.b.RemoveTaskTypeSpec(ctx, "hello.t"), host.ErrNotFound)
	_, err = f.b.TaskTypeSpec(ctx, "hello.t")
	wantErr(t, err, host.ErrNotFound)
	n := f.countEvents()
	if n[host.EventTaskTypeSpecSet] != 3 || n[host.EventTaskTypeSpecRemoved] != 1 {
		t.Fatalf("events %v", n)
	}
	// A spec is not a route.
	_, err = f.b.Resolve(ctx, "a.first")
	wantErr(t, err, host.ErrNotFound)
}

func agentsStoredWhole(f *fixture) {
	t := f.t
	if list, err := f.b.ListAgents(ctx); err != nil || len(list) != 0 {
		t.Fatalf("no agents yet: %+v %v", list, err)
	}
	rec := &host.AgentRecord{
		Agent:        host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc", Metadata: []byte(`{"k":1}`)},
		Wallets:      []host.WalletIdentity{{AgentID: "arc", Chain: "eth", Address: "0xabc", Capabilities: []string{"sign"}}},
		Constitution: &host.AgentConstitution{AgentID: "arc", SoulPath: "soul.md", PurposePath: "purpose.md", SoulHash: "sha256:aa", PurposeHash: "sha256:bb", Version: "1", RevisedAt: "2026-01-01"},
		Messaging:    &host.MessagingIdentity{Topics: []string{"crisis.*"}},
	}
	if replaced, err := f.b.PutAgent(ctx, rec); err != nil || replaced {
		t.Fatalf("put: %v %v", replaced, err)
	}
	if got, err := f.b.Agent(ctx, "arc"); err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("agent\n%+v\nwant\n%+v (%v)", got, rec, err)
	}
	rec.Agent.DisplayName, rec.Wallets = "Arc 2", nil
	if replaced, err := f.b.PutAgent(ctx, rec); err != nil || !replaced {
		t.Fatalf("re-put: %v %v", replaced, err)
	}
	if got, err := f.b.Agent(ctx, "arc"); err != nil || got.Agent.DisplayName != "Arc 2" || len(got.Wallets) != 0 {
		t.Fatalf("replaced agent %+v %v", got, err)
	}
	if _, err := f.b.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "abe", InternalName: "abe", DisplayName: "Abe"}}); err != nil {
		t.Fatal(err)
	}
	_, err := f.b.Agent(ctx, "nope")
	wantErr(t, err, host.ErrNotFound)
	list, err := f.b.ListAgents(ctx)
	if err != nil || len(list) != 2 || list[0].Agent.AgentID != "abe" || list[1].Agent.AgentID != "arc" {
		t.Fatalf("agents %+v %v", list, err)
	}
	evs := f.events(host.EventFilter{Type: host.EventAgentRegistered})
	if len(evs) != 3 {
		t.Fatalf("agent_registered events %+v", evs)
	}
	if d := eventData(t, evs[1]); d["agent_id"] != "arc" || d["replaced"] != true {
		t.Fatalf("agent_registered %s", evs[1].Data)
	}
}

func agentsProfiles(f *fixture) {
	t := f.t
	p := &host.SubagentProfile{ProfileID: "writer", Style: "claude-like", Role: "writes", DefaultAdapterID: "echo", PromptParts: []string{"a", "b"},
		SkillIDs: []string{"s"}, ContextPolicy: host.ContextPolicy{MaxPromptChars: 100, IncludeRecentMemory: true},
		ResultPolicy: host.ResultPolicy{AllowFollowUpTasks: true}, IntegrationPolicy: map[string]string{"k": "v"}}
	if replaced, err := f.b.PutProfile(ctx, p); err != nil || replaced {
		t.Fatalf("put: %v %v", replaced, err)
	}
	if got, err := f.b.Profile(ctx, "writer"); err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("profile\n%+v\nwant\n%+v (%v)", got, p, err)
	}
	p.Role = "rewrites"
	if replaced, err := f.b.PutProfile(ctx, p); err != nil || !replaced {
		t.Fatalf("re-put: %v %v", replaced, err)
	}
	if _, err := f.b.PutProfile(ctx, &host.SubagentProfile{ProfileID: "editor", Role: "edits"}); err != nil {
		t.Fatal(err)
	}
	list, err := f.b.ListProfiles(ctx)
	if err != nil || len(list) != 2 || list[0].ProfileID != "editor" || list[1].Role != "rewrites" {
		t.Fatalf("profiles %+v %v", list, err)
	}
	_, err = f.b.Profile(ctx, "nope")
	wantErr(t, err, host.ErrNotFound)
	if n := f.countEvents()[host.EventProfileRegistered]; n != 3 {
		t.Fatalf("%d profile_registered events", n)
	}
}
