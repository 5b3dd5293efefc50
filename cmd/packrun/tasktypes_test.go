package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskTypesCommands: set (refused naming the field when what it names
// does not exist), show, list --json, unset; tasks enqueue refuses an
// unknown skill with one line naming skill_ids.
func TestTaskTypesCommands(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHelloWat(t, h, dir)
	oneLine := func(args []string, code int, want string) {
		t.Helper()
		c, out, errs := h.run(args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		// A usage error (64) adds the --help hint as a second line.
		if c != code || out != "" || len(lines) > 2 || len(lines) == 2 && c != exitUsage || !strings.Contains(lines[0], want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and %q", args, c, out, errs, code, want)
		}
	}
	oneLine([]string{"task-types", "set", "hello.wat", "--default-model", "m"}, exitUsage, "default_model")
	oneLine([]string{"task-types", "set", "hello.wat", "--default-adapter", "nope"}, exitUsage, "default_adapter_id")
	oneLine([]string{"task-types", "set", "hello.wat", "--allow-skill", "nope"}, exitUsage, "allowed_skill_ids")
	oneLine([]string{"task-types", "set", "hello.wat", "--pack", "local.hello.wat"}, exitUsage, "--pack and --node")
	oneLine([]string{"task-types", "show", "nobody.serves"}, exitNotFound, "nobody.serves")

	out := h.ok("task-types", "set", "hello.wat", "--allow-skill", "example.hello", "--require-adapter-audit", "--pack", "local.hello.wat", "--node", "example.hello")
	if !strings.Contains(out, "allowed_skill_ids:    example.hello") || !strings.Contains(out, "(operator route)") || !strings.Contains(out, "require_adapter_audit=true") {
		t.Fatalf("set: %s", out)
	}
	var list []struct {
		TaskType string `json:"task_type"`
		Spec     *struct {
			AllowedSkillIDs []string `json:"allowed_skill_ids"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(h.ok("task-types", "list", "--json")), &list); err != nil || len(list) != 1 || list[0].Spec == nil || list[0].Spec.AllowedSkillIDs[0] != "example.hello" {
		t.Fatalf("list: %v %+v", err, list)
	}
	oneLine([]string{"tasks", "enqueue", "--type", "hello.wat", "--skill", "not.a.skill"}, exitUsage, "skill_ids")
	oneLine([]string{"tasks", "enqueue", "--type", "hello.wat", "--adapter", "nonexistent"}, exitUsage, "requested_adapter_id")
	oneLine([]string{"tasks", "enqueue", "--type", "hello.wat", "--profile", "nope"}, exitUsage, "requested_profile_id")
	oneLine([]string{"tasks", "enqueue", "--type", "hello.wat", "--model", "gpt-x"}, exitUsage, "requested_model")
	h.ok("tasks", "enqueue", "--type", "hello.wat", "--skill", "example.hello", "--input", `{"name":"x"}`)
	h.ok("task-types", "unset", "hello.wat")
	oneLine([]string{"task-types", "unset", "hello.wat"}, exitNotFound, "hello.wat")
	if out := h.ok("task-types", "show", "hello.wat"); !strings.Contains(out, "spec:       none") || !strings.Contains(out, "(manifest)") {
		t.Fatalf("after unset: %s", out)
	}
}
