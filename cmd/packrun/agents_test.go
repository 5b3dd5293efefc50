package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentsAndProfilesCommands: add (hashing the constitution's files,
// replacing on re-add), list, show; malformed files and unknown adapters
// are refused with one line naming the field, and nothing is stored.
func TestAgentsAndProfilesCommands(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHelloWat(t, h, dir)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("SOUL.md", "# Soul\n")
	write("PURPOSE.md", "# Purpose\n")
	agent := `{"agent":{"agent_id":"arc","internal_name":"arc","display_name":"Arc"},
		"constitution":{"agent_id":"arc","soul_path":"SOUL.md","purpose_path":"PURPOSE.md","version":"1","revised_at":"2026-01-01"}}`
	refused := func(code int, want string, args ...string) {
		t.Helper()
		c, out, errs := h.run(args...)
		if c != code || out != "" || !strings.Contains(strings.SplitN(errs, "\n", 2)[0], want) {
			t.Errorf("%v: exit %d %q %q, want exit %d naming %s", args, c, out, errs, code, want)
		}
	}
	refused(exitUsage, "agent.agent_id", "agents", "add", write("bad.json", strings.Replace(agent, `"internal_name":"arc"`, `"internal_name":"loom"`, 1)))
	refused(exitUsage, "constitution.soul_path", "agents", "add", write("nosoul.json", strings.Replace(agent, `"SOUL.md"`, `"MISSING.md"`, 1)))
	refused(exitUsage, "constitution.soul_hash", "agents", "add", write("badhash.json", strings.Replace(agent, `"version"`, `"soul_hash":"sha256:`+strings.Repeat("0", 64)+`","version"`, 1)))
	if out := h.ok("agents", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("refused agents stored: %s", out)
	}
	file := write("arc.json", agent)
	if out := h.ok("agents", "add", file); !strings.HasPrefix(out, "added agent arc (constitution sha256:") {
		t.Fatalf("add: %s", out)
	}
	if out := h.ok("agents", "add", file); !strings.HasPrefix(out, "replaced agent arc") {
		t.Fatalf("re-add: %s", out)
	}
	var rec struct {
		Constitution struct {
			SoulHash string `json:"soul_hash"`
		} `json:"constitution"`
	}
	if err := json.Unmarshal([]byte(h.ok("agents", "show", "arc")), &rec); err != nil || !strings.HasPrefix(rec.Constitution.SoulHash, "sha256:") {
		t.Fatalf("show: %v %+v", err, rec)
	}
	refused(exitNotFound, "nope", "agents", "show", "nope")

	profile := `{"profile_id":"writer","style":"claude-like","role":"writes","default_adapter_id":"echo","prompt_parts":["be brief"],
		"skill_ids":["example.hello"],"context_policy":{"max_prompt_chars":100,"include_recent_memory":false},
		"result_policy":{"allow_follow_up_tasks":true,"allow_external_messages":false}}`
	refused(exitUsage, "default_adapter_id", "profiles", "add", write("writer.json", profile)) // no adapters.json yet
	os.WriteFile(filepath.Join(h.home, "adapters.json"), []byte(`{"adapters":[{"adapter_id":"echo","kind":"script","command":"/bin/cat","timeout_ms":5000}]}`), 0o600)
	refused(exitUsage, "style", "profiles", "add", write("style.json", strings.Replace(profile, "claude-like", "gpt-like", 1)))
	refused(exitUsage, "skill_ids", "profiles", "add", write("skill.json", strings.Replace(profile, `["example.hello"]`, `["nope"]`, 1)))
	if out := h.ok("profiles", "add", filepath.Join(dir, "writer.json")); out != "added profile writer\n" {
		t.Fatalf("profiles add: %q", out)
	}
	if out := h.ok("profiles", "list"); !strings.Contains(out, "writer") || !strings.Contains(out, "claude-like") {
		t.Fatalf("profiles list: %s", out)
	}
	h.ok("tasks", "enqueue", "--type", "hello.wat", "--profile", "writer", "--input", `{"name":"x"}`)
}
