package packrun

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// withAgent is a home with the echo skill serving echo.t, the agent arc
// (with a constitution) and the profile writer, which echo.t runs as.
func withAgent(t *testing.T) (*fixture, *host.AgentRecord) {
	t.Helper()
	f := withAdapters(t)
	echo := probe()
	echo.nodes = `[{"typeId":"probe.echo","kind":"skill","taskTypes":["echo.t"]}]`
	f.install(t, echo)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "SOUL.md"), []byte("soul"), 0o644)
	os.WriteFile(filepath.Join(dir, "PURPOSE.md"), []byte("purpose"), 0o644)
	agentFile := filepath.Join(dir, "arc.json")
	os.WriteFile(agentFile, []byte(`{"agent":{"agent_id":"arc","internal_name":"arc","display_name":"Arc"},
		"constitution":{"agent_id":"arc","soul_path":"SOUL.md","purpose_path":"PURPOSE.md","version":"1","revised_at":"2026-01-01"}}`), 0o644)
	profileFile := filepath.Join(dir, "writer.json")
	os.WriteFile(profileFile, []byte(`{"profile_id":"writer","style":"codex-like","role":"writes","default_adapter_id":"llm","default_model":"m2",
		"prompt_parts":["be brief"],"skill_ids":["probe.echo"],"context_policy":{"max_prompt_chars":100,"include_recent_memory":false},
		"result_policy":{"allow_follow_up_tasks":true,"allow_external_messages":false}}`), 0o644)
	rec, _, err := f.AddAgent(ctx, agentFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.AddProfile(ctx, profileFile); err != nil {
		t.Fatal(err)
	}
	if err := f.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "echo.t", DefaultProfileID: "writer"}, nil); err != nil {
		t.Fatal(err)
	}
	return f, rec
}

// A task run by Host.Run as a registered agent and profile: the node gets
// nodeContext.agent, bundle_compiled is in the chain, and Host.Replay of
// the attempt (what `packrun replay` does) says identical.
func TestAgentTaskReplaysIdentical(t *testing.T) {
	f, rec := withAgent(t)
	task, err := f.Enqueue(ctx, host.TaskIntent{TaskType: "echo.t", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := f.Store().Task(ctx, task.TaskID)
		if got.Status.Terminal() {
			if got.Status != host.TaskCompleted {
				t.Fatalf("task %s: %s", got.Status, got.LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	atts, _ := f.Store().ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	if len(atts) != 1 {
		t.Fatalf("%d attempts", len(atts))
	}
	var out struct {
		NodeContext struct {
			Agent map[string]any `json:"agent"`
		} `json:"nodeContext"`
	}
	json.Unmarshal(atts[0].Output, &out)
	a := out.NodeContext.Agent
	if a["agent_id"] != "arc" || a["profile_id"] != "writer" || a["model"] != "m2" || a["adapter_id"] != "llm" || a["constitution_hash"] != rec.Constitution.Hash() {
		t.Fatalf("nodeContext.agent %v", a)
	}
	evs, _ := f.Store().Events(ctx, host.EventFilter{Type: host.EventBundleCompiled, TaskID: task.TaskID})
	if len(evs) != 1 || !strings.Contains(string(evs[0].Data), rec.Constitution.Hash()) {
		t.Fatalf("bundle_compiled %+v", evs)
	}
	v, err := f.Replay(ctx, atts[0].AttemptID, ReplayOptions{})
	if err != nil || !v.Identical {
		t.Fatalf("replay: %+v %v", v, err)
	}
}

// GET /v1/agents and /v1/profiles list what is registered.
func TestAgentsAPI(t *testing.T) {
	f := withAdapters(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "arc.json")
	os.WriteFile(file, []byte(`{"agent":{"agent_id":"arc","internal_name":"arc","display_name":"Arc"}}`), 0o644)
	if _, _, err := f.AddAgent(ctx, file); err != nil {
		t.Fatal(err)
	}
	hd, err := f.Handler(ctx, HandlerOptions{Addr: "127.0.0.1:0", InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	for path, want := range map[string]string{"/v1/agents": `{"agents":[{"agent":{"agent_id":"arc"`, "/v1/profiles": `{"profiles":[]}`} {
		w := httptest.NewRecorder()
		hd.ServeHTTP(w, httptest.NewRequest("GET", "http://127.0.0.1"+path, nil))
		if w.Code != 200 || !strings.HasPrefix(w.Body.String(), want) {
			t.Errorf("GET %s: %d %s", path, w.Code, w.Body)
		}
	}
}
