package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// agentPack is the probe module with skills for task types: probe.echo
// (echo.t: returns its request envelope), probe.host (host.t: calls the
// "echo" adapter), probe.followup (start.t: stages a probe.next task).
func agentEnv(t *testing.T, adaptersJSON string) env {
	t.Helper()
	arch := testPack(t, "../../testdata/modules/probe.wasm", "local.probe", 0, `"nodes":[
		{"typeId":"probe.echo","kind":"skill","taskTypes":["echo.t"]},
		{"typeId":"probe.host","kind":"skill","taskTypes":["host.t"]},
		{"typeId":"probe.followup","kind":"skill","taskTypes":["start.t"]}]`+allGrants, nil)
	e := newEnvAdapters(t, arch, adaptersJSON)
	var routes []host.TaskTypeRoute
	for tt, node := range map[string]string{"echo.t": "probe.echo", "host.t": "probe.host", "start.t": "probe.followup", "probe.next": "probe.echo"} {
		routes = append(routes, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: "local.probe", Node: node})
	}
	if err := e.backend.SetPackTaskTypes(context.Background(), "local.probe", routes); err != nil {
		t.Fatal(err)
	}
	return e
}

// runOne enqueues in and runs it to its end; it returns the task and its
// attempt.
func (e env) runOne(t *testing.T, in host.TaskIntent) (*host.TaskRecord, *host.Attempt) {
	t.Helper()
	ctx := context.Background()
	if in.Source == "" {
		in.Source = "test"
	}
	if in.Payload == nil {
		in.Payload = json.RawMessage(`{}`)
	}
	task, err := e.backend.Enqueue(ctx, in, host.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.backend.Claim(ctx, "test", time.Now())
	if err != nil || claimed.TaskID != task.TaskID {
		t.Fatalf("claim: %v %+v", err, claimed)
	}
	e.d.RunTask(ctx, claimed)
	done, _ := e.backend.Task(ctx, task.TaskID)
	atts, _ := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	if len(atts) == 0 {
		return done, nil
	}
	return done, atts[0]
}

func putAgentAndProfile(t *testing.T, e env, p host.SubagentProfile) {
	t.Helper()
	ctx := context.Background()
	rec := &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"},
		Constitution: &host.AgentConstitution{AgentID: "arc", SoulPath: "SOUL.md", PurposePath: "PURPOSE.md",
			SoulHash: host.ContentHash([]byte("soul")), PurposeHash: host.ContentHash([]byte("purpose")), Version: "1", RevisedAt: "2026-01-01"}}
	if _, err := e.backend.PutAgent(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if p.ProfileID == "" {
		p = host.SubagentProfile{ProfileID: "writer", Style: "claude-like", Role: "writes", DefaultAdapterID: "echo",
			PromptParts: []string{"You write."}, SkillIDs: []string{"probe.echo"},
			ContextPolicy: host.ContextPolicy{MaxPromptChars: 20, IncludeRecentMemory: true},
			ResultPolicy:  host.ResultPolicy{AllowFollowUpTasks: true}}
	}
	if _, err := e.backend.PutProfile(ctx, &p); err != nil {
		t.Fatal(err)
	}
}

// A task's agent and profile are resolved at claim, projected into
// nodeContext.agent (context_policy applied), recorded in the attempt,
// announced by bundle_compiled, and the attempt replays identical.
func TestBundleProjectedRecordedAndReplayed(t *testing.T) {
	ctx := context.Background()
	e := agentEnv(t, echoAdapter)
	putAgentAndProfile(t, e, host.SubagentProfile{})
	if err := e.backend.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "echo.t", PayloadSchemaID: "x", DefaultProfileID: "writer"}); err != nil {
		t.Fatal(err)
	}
	first, _ := e.runOne(t, host.TaskIntent{TaskType: "echo.t"})
	if first.Status != host.TaskCompleted {
		t.Fatalf("first: %s %s", first.Status, first.LastError)
	}
	task, att := e.runOne(t, host.TaskIntent{TaskType: "echo.t", Subject: "Write the weekly report, please"})
	if task.Status != host.TaskCompleted {
		t.Fatalf("task %s: %s", task.Status, task.LastError)
	}
	var env struct {
		NodeContext struct{ Agent AgentContext } `json:"nodeContext"`
	}
	if err := json.Unmarshal(att.Output, &env); err != nil {
		t.Fatal(err)
	}
	ac := env.NodeContext.Agent
	if ac.AgentID != "arc" || ac.InternalName != "arc" || ac.ProfileID != "writer" || ac.Style != "claude-like" || ac.Role != "writes" ||
		ac.AdapterID != "echo" || len(ac.SkillIDs) != 1 || !strings.HasPrefix(ac.ConstitutionHash, "sha256:") || !strings.HasPrefix(ac.BundleHash, "sha256:") {
		t.Fatalf("nodeContext.agent %+v", ac)
	}
	// max_prompt_chars: 20 characters of "You write.\n\nWrite the weekly report, please".
	if ac.Prompt != "You write.\n\nWrite th" || !ac.PromptTruncated {
		t.Fatalf("prompt %q (truncated %v)", ac.Prompt, ac.PromptTruncated)
	}
	// include_recent_memory: the first task, settled before.
	if len(ac.RecentTasks) != 1 || ac.RecentTasks[0].TaskID != first.TaskID || ac.RecentTasks[0].Status != host.TaskCompleted {
		t.Fatalf("recent tasks %+v", ac.RecentTasks)
	}
	if !strings.Contains(string(att.Diagnostics), `"bundle_hash":"`+ac.BundleHash+`"`) {
		t.Fatalf("diagnostics %s", att.Diagnostics)
	}
	evs, _ := e.backend.Events(ctx, host.EventFilter{Type: host.EventBundleCompiled, TaskID: task.TaskID})
	var data map[string]any
	if len(evs) != 1 || json.Unmarshal(evs[0].Data, &data) != nil || data["bundle_hash"] != ac.BundleHash || data["agent_id"] != "arc" ||
		data["profile_id"] != "writer" || data["constitution_hash"] != ac.ConstitutionHash || data["attempt_id"] != att.AttemptID {
		t.Fatalf("bundle_compiled %+v", evs)
	}
	// Replay hands the node the recorded nodeContext.agent.
	tr, err := replay.FromAttempt(att)
	if err != nil {
		t.Fatal(err)
	}
	l, err := e.d.load(ctx, must(e.d.cfg.Packs.Open(ctx, "local.probe")), "probe.echo", runtime.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := replay.Run(ctx, l.mod, tr, nil)
	if err != nil || !v.Identical {
		t.Fatalf("replay: %+v %v", v, err)
	}
	tr.Agent = nil
	if v, _ := replay.Run(ctx, l.mod, tr, nil); v.Identical {
		t.Fatal("replay without the agent is identical too: the test shows nothing")
	}
	// Several agents and nothing choosing: the task fails, naming why.
	e.backend.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "loom", InternalName: "loom", DisplayName: "Loom"}})
	if task, _ := e.runOne(t, host.TaskIntent{TaskType: "echo.t"}); task.Status != host.TaskPermanentFailure || !strings.Contains(task.LastError, "integration_policy.agent_id") {
		t.Fatalf("two agents: %s %q", task.Status, task.LastError)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// success_policy is applied: require_adapter_audit needs an adapter call,
// require_artifacts an artifact.
func TestSuccessPolicyApplied(t *testing.T) {
	ctx := context.Background()
	e := agentEnv(t, echoAdapter)
	audit := &host.SuccessPolicy{RequireAdapterAudit: true}
	for tt, p := range map[string]*host.SuccessPolicy{"echo.t": audit, "host.t": audit} {
		if err := e.backend.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: tt, PayloadSchemaID: "x", SuccessPolicy: p}); err != nil {
			t.Fatal(err)
		}
	}
	if task, att := e.runOne(t, host.TaskIntent{TaskType: "echo.t"}); task.Status != host.TaskPermanentFailure ||
		!strings.Contains(task.LastError, "require_adapter_audit") || att.Outcome != abi.Completed {
		t.Fatalf("no adapter call: %s %q", task.Status, task.LastError)
	}
	if task, _ := e.runOne(t, host.TaskIntent{TaskType: "host.t"}); task.Status != host.TaskCompleted {
		t.Fatalf("adapter call made: %s %q", task.Status, task.LastError)
	}
	e.backend.SetTaskTypeSpec(ctx, host.TaskTypeSpec{TaskType: "host.t", PayloadSchemaID: "x", SuccessPolicy: &host.SuccessPolicy{RequireArtifacts: true}})
	if task, _ := e.runOne(t, host.TaskIntent{TaskType: "host.t"}); task.Status != host.TaskPermanentFailure || !strings.Contains(task.LastError, "require_artifacts") {
		t.Fatalf("no artifact: %s %q", task.Status, task.LastError)
	}
}

// verify_claimed_file_changes: a claimed file change must be an artifact
// of the attempt; artifact_roles: only the listed roles may be stored.
func TestArtifactRolesAndClaimedFileChanges(t *testing.T) {
	ctx := context.Background()
	e := agentEnv(t, echoAdapter)
	task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "echo.t", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := &bundle{spec: host.TaskTypeSpec{ArtifactRoles: []string{"execute-report"}, SuccessPolicy: &host.SuccessPolicy{VerifyClaimedFileChanges: true}}}
	svc := newServices(binding{backend: e.backend, grants: grantsOf("artifacts"), taskID: task.TaskID, attemptID: "att-roles", bundle: b})
	if st, _ := svc.Serve(ctx, abi.HostArtifactPut, []byte(`{"role":"output","name":"a.txt","text":"x"}`)); st != abi.StatusAccessDenied {
		t.Fatalf("role output: status %d", st)
	}
	if st, _ := svc.Serve(ctx, abi.HostArtifactPut, []byte(`{"role":"execute-report","name":"a.txt","text":"x"}`)); st != abi.StatusOK {
		t.Fatalf("role report: status %d", st)
	}
	if why := b.successFailure(svc, json.RawMessage(`{"file_changes":["a.txt"]}`), nil); why != "" {
		t.Fatalf("a.txt is an artifact: %s", why)
	}
	if why := b.successFailure(svc, json.RawMessage(`{}`), &abi.TaskOutcome{FileChanges: []string{"a.txt", "b.txt"}}); !strings.Contains(why, `"b.txt"`) {
		t.Fatalf("b.txt is not: %q", why)
	}
}

// result_policy.allow_follow_up_tasks=false: the follow-up is refused
// (access denied to the guest, counted in the diagnostics) and none is
// created.
func TestFollowUpsRefusedByResultPolicy(t *testing.T) {
	ctx := context.Background()
	e := agentEnv(t, echoAdapter)
	putAgentAndProfile(t, e, host.SubagentProfile{ProfileID: "quiet", Style: "codex-like", Role: "r", DefaultAdapterID: "echo",
		PromptParts: []string{}, SkillIDs: []string{}, ContextPolicy: host.ContextPolicy{MaxPromptChars: 100}})
	task, att := e.runOne(t, host.TaskIntent{TaskType: "start.t", RequestedProfileID: "quiet"})
	if task.Status != host.TaskCompleted || string(att.Output) != `{"status":`+itoa(int(abi.StatusAccessDenied))+`}` ||
		!strings.Contains(string(att.Diagnostics), "allow_follow_up_tasks") {
		t.Fatalf("task %s %s, output %s, diagnostics %s", task.Status, task.LastError, att.Output, att.Diagnostics)
	}
	if list, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "probe.next"}); len(list) != 0 {
		t.Fatalf("follow-ups created: %d", len(list))
	}
	// Without the policy (no profile), the follow-up is created.
	if task, _ := e.runOne(t, host.TaskIntent{TaskType: "start.t"}); task.Status != host.TaskCompleted {
		t.Fatal(task.LastError)
	}
	if list, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "probe.next"}); len(list) != 1 {
		t.Fatalf("follow-ups: %d", len(list))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The task's model reaches the harness's argv, from requested_model or the
// adapter's default; priority never changes it.
func TestModelReachesTheHarnessAndPriorityDoesNot(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "harness")
	os.WriteFile(fake, []byte("#!/bin/sh\nprintf '\"%s\"' \"$*\"\n"), 0o755)
	cfg := `{"adapters":[{"adapter_id":"echo","kind":"claude-code","command":"` + fake + `","timeout_ms":5000,
		"model":"m1","models":["m2"],"autonomy":{"profile":"restricted"}}]}`
	e := agentEnv(t, cfg)
	argv := func(in host.TaskIntent) string {
		t.Helper()
		task, att := e.runOne(t, in)
		var out struct{ AdapterOut struct{ Output string } }
		if task.Status != host.TaskCompleted || json.Unmarshal(att.Output, &out) != nil {
			t.Fatalf("task %s %q, output %s", task.Status, task.LastError, att.Output)
		}
		return out.AdapterOut.Output
	}
	if got := argv(host.TaskIntent{TaskType: "host.t", RequestedAdapterID: "echo", RequestedModel: "m2"}); got != "--model m2" {
		t.Fatalf("requested model: argv %q", got)
	}
	for _, p := range []int{0, 1, 9} {
		if got := argv(host.TaskIntent{TaskType: "host.t", Priority: host.Priority(p)}); got != "--model m1" {
			t.Fatalf("priority %d: argv %q, want the adapter's default model", p, got)
		}
	}
	// The type's default_model is used when the intent names none.
	e.backend.SetTaskTypeSpec(context.Background(), host.TaskTypeSpec{TaskType: "host.t", PayloadSchemaID: "x", DefaultAdapterID: "echo", DefaultModel: "m2"})
	for _, p := range []int{1, 9} {
		if got := argv(host.TaskIntent{TaskType: "host.t", Priority: host.Priority(p)}); got != "--model m2" {
			t.Fatalf("default_model, priority %d: argv %q", p, got)
		}
	}
}

func grantsOf(services ...string) packs.Grants {
	var g packs.Grants
	for _, s := range services {
		g.Services = append(g.Services, packs.Service(s))
	}
	return g
}

// A follow-up a node stages is checked against the home (Config.CheckIntent):
// refused, the guest gets a validation status and nothing is created.
func TestFollowUpsCheckedAgainstTheHome(t *testing.T) {
	ctx := context.Background()
	e := agentEnv(t, echoAdapter)
	e.d.cfg.CheckIntent = func(_ context.Context, in *host.TaskIntent) error {
		return host.Invalid("task intent", "task_type", "%s is not served here", in.TaskType)
	}
	task, att := e.runOne(t, host.TaskIntent{TaskType: "start.t"})
	if task.Status != host.TaskCompleted || string(att.Output) != `{"status":`+itoa(int(abi.StatusValidation))+`}` {
		t.Fatalf("task %s, output %s", task.Status, att.Output)
	}
	if list, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "probe.next"}); len(list) != 0 {
		t.Fatalf("follow-ups created: %d", len(list))
	}
}

// setupBackend is a store implementing host.TaskSetups over its own
// reads, counting the calls (and failing TaskSetup with fail, if set).
type setupBackend struct {
	host.Backend
	fail          error
	setups, reads int
}

func (b *setupBackend) Resolve(ctx context.Context, taskType string) (host.TaskTypeRoute, error) {
	b.reads++
	return b.Backend.Resolve(ctx, taskType)
}

func (b *setupBackend) TaskTypeSpec(ctx context.Context, taskType string) (host.TaskTypeSpec, error) {
	b.reads++
	return b.Backend.TaskTypeSpec(ctx, taskType)
}

func (b *setupBackend) ListAgents(ctx context.Context) ([]host.AgentRecord, error) {
	b.reads++
	return b.Backend.ListAgents(ctx)
}

func (b *setupBackend) TaskSetup(ctx context.Context, taskType string) (*host.TaskSetup, error) {
	b.setups++
	if b.fail != nil {
		return nil, b.fail
	}
	out := &host.TaskSetup{}
	out.Route, out.RouteErr = b.Backend.Resolve(ctx, taskType)
	out.Spec, out.SpecErr = b.Backend.TaskTypeSpec(ctx, taskType)
	out.Agents, out.AgentsErr = b.Backend.ListAgents(ctx)
	return out, nil
}

// A backend implementing host.TaskSetups is read once to start a task
// (its route, spec and agents), not three times; if that read fails, the
// task fails as when its route cannot be read.
func TestRunTaskReadsSetupOnce(t *testing.T) {
	e := agentEnv(t, echoAdapter)
	if err := e.backend.SetTaskTypeSpec(context.Background(), host.TaskTypeSpec{TaskType: "echo.t", DefaultModel: "m1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.backend.PutAgent(context.Background(), &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}); err != nil {
		t.Fatal(err)
	}
	sb := &setupBackend{Backend: e.backend}
	e.d.cfg.Backend = sb
	done, att := e.runOne(t, host.TaskIntent{TaskType: "echo.t"})
	if done.Status != host.TaskCompleted || att == nil {
		t.Fatalf("task %s (%s), attempt %v", done.Status, done.LastError, att)
	}
	if out := string(att.Output); !strings.Contains(out, `"model":"m1"`) || !strings.Contains(out, `"agent_id":"arc"`) {
		t.Fatalf("the spec's default model or the agent did not reach the node: %s", out)
	}
	if sb.setups != 1 || sb.reads != 0 {
		t.Fatalf("%d TaskSetup calls and %d separate reads, want 1 and 0", sb.setups, sb.reads)
	}

	sb.fail = errors.New("connection refused")
	done, _ = e.runOne(t, host.TaskIntent{TaskType: "echo.t"})
	if done.Status == host.TaskCompleted || !strings.Contains(done.LastError, "connection refused") {
		t.Fatalf("task %s (%q), want failed naming the read's error", done.Status, done.LastError)
	}
}
