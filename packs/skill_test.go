package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// skillManifest is a one-module, one-skill manifest whose node carries skill
// (a JSON object) and kind.
func skillManifest(kind, skill string) []byte {
	taskTypes := `,"taskTypes":["t.run"]`
	if kind != "skill" {
		taskTypes = ""
	}
	return []byte(`{"name":"local.skills","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"m.wasm","sha256":"` + sha(wasmStub) + `"}]},
		"nodes":[{"typeId":"t.node","kind":"` + kind + `","description":"does t"` + taskTypes + `,"skill":` + skill + `}]}`)
}

const fullSkill = `{"skill_id":"skills.t","description":"the t skill","tags":["demo","t"],
	"instruction_path":"SKILL.md","subagent_path":"agents/AGENT.md",
	"cli_commands":[{"name":"run","command":"packrun tasks add --type t.run","description":"runs it"}],
	"input_schema_id":"agent-runtime/task.intent/v1","output_schema_id":"t.out"}`

func TestSkillManifestDecodes(t *testing.T) {
	m, err := DecodeManifest(skillManifest("skill", fullSkill))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := m.Nodes[0].SkillManifest()
	if !ok || s.SkillID != "skills.t" || s.InstructionPath != "SKILL.md" || len(s.CLICommands) != 1 || s.CLICommands[0].Name != "run" ||
		len(s.Tags) != 2 || s.OutputSchemaID != "t.out" {
		t.Fatalf("skill %+v", s)
	}
	// Without a skill object a skill node still has a manifest: skill_id
	// defaults to the typeId, the description to the node's.
	m.Nodes[0].Skill = nil
	if s, ok := m.Nodes[0].SkillManifest(); !ok || s.SkillID != "t.node" || s.Description != "does t" {
		t.Fatalf("defaults %+v", s)
	}
	// The published schema accepts what the decoder accepts.
	schema := compilePackSchema(t)
	var doc any
	json.Unmarshal(skillManifest("skill", fullSkill), &doc)
	if err := schema.Validate(doc); err != nil {
		t.Fatalf("schema: %v", err)
	}
}

func TestSkillManifestRefused(t *testing.T) {
	for _, tc := range []struct {
		name, kind, skill, path string
	}{
		{"not a skill", "node", `{"skill_id":"x"}`, "$.nodes[0].skill"},
		{"unknown field", "skill", `{"skillId":"x"}`, "$.nodes[0].skill.skillId"},
		{"bad skill_id", "skill", `{"skill_id":"no spaces"}`, "$.nodes[0].skill.skill_id"},
		{"escaping path", "skill", `{"instruction_path":"../pack.json"}`, "$.nodes[0].skill.instruction_path"},
		{"absolute path", "skill", `{"subagent_path":"/etc/passwd"}`, "$.nodes[0].skill.subagent_path"},
		{"command without command", "skill", `{"cli_commands":[{"name":"a"}]}`, "$.nodes[0].skill.cli_commands[0].command"},
		{"duplicate command", "skill", `{"cli_commands":[{"name":"a","command":"x"},{"name":"a","command":"y"}]}`, "$.nodes[0].skill.cli_commands[1].name"},
		{"tags not strings", "skill", `{"tags":[1]}`, "$.nodes[0].skill.tags[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeManifest(skillManifest(tc.kind, tc.skill))
			var v *ValidationError
			if !errors.As(err, &v) || !hasProblem(v, tc.path) {
				t.Fatalf("got %v, want a problem at %s", err, tc.path)
			}
		})
	}
}

func hasProblem(v *ValidationError, path string) bool {
	for _, p := range v.Problems {
		if p.Path == path {
			return true
		}
	}
	return false
}

// The files a skill names must be in the pack, under assets/.
func TestSkillPathsMustExist(t *testing.T) {
	files := map[string][]byte{"pack.json": skillManifest("skill", `{"instruction_path":"SKILL.md","subagent_path":"agents/AGENT.md"}`), "m.wasm": wasmStub,
		"assets/SKILL.md": []byte("# t")}
	if _, err := Pack(writeDir(t, files)); err == nil || !strings.Contains(err.Error(), "skill.subagent_path: assets/agents/AGENT.md is not in the pack") {
		t.Fatalf("missing AGENT.md: %v", err)
	}
	files["assets/agents/AGENT.md"] = []byte("# agent")
	b, err := Pack(writeDir(t, files))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Read(bytes.NewReader(b), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := a.Manifest.Nodes[0].SkillManifest(); s.SubagentPath != "agents/AGENT.md" {
		t.Fatalf("read back %+v", s)
	}
}
