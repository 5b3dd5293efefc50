package packrun

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// skilled is examples/hello-wat whose node carries a SkillManifest naming
// its SKILL.md.
func skilled(version string) packSpec {
	return packSpec{name: "local.hello.wat", version: version, module: "examples/hello-wat/hello.wasm",
		assets: map[string]string{"SKILL.md": "# Greeting\nSay hello.\n"},
		nodes: `[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.wat"],"description":"greets",
			"skill":{"skill_id":"greeting","tags":["demo"],"instruction_path":"SKILL.md",
			"cli_commands":[{"name":"greet","command":"packrun invoke local.hello.wat --input '{\"name\":\"x\"}'"}]}}]`}
}

// Host.Skills and GET /v1/skills list the newest version's skills, with
// their SkillManifest fields.
func TestSkillsListed(t *testing.T) {
	f := newFixture(t)
	f.install(t, skilled("1.0.0"))
	f.install(t, skilled("1.1.0"))
	f.install(t, probe()) // no skill
	list, err := f.Skills(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].SkillID != "greeting" || list[0].Pack != "local.hello.wat@1.1.0" || list[0].Node != "example.hello" ||
		list[0].InstructionPath != "SKILL.md" || list[0].Description != "greets" || len(list[0].TaskTypes) != 1 {
		t.Fatalf("skills %+v", list)
	}
	hd, err := f.Handler(ctx, HandlerOptions{Addr: "127.0.0.1:0", InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	hd = apiSpec(t).Handler(t, hd) // every API response checked against the OpenAPI document
	w := httptest.NewRecorder()
	hd.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/v1/skills", nil))
	var got struct {
		Skills []map[string]any `json:"skills"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusOK || len(got.Skills) != 1 {
		t.Fatalf("GET /v1/skills: %d %s", w.Code, w.Body)
	}
	s := got.Skills[0]
	if s["skill_id"] != "greeting" || s["instruction_path"] != "SKILL.md" || s["pack"] != "local.hello.wat@1.1.0" || s["task_types"] == nil || s["cli_commands"] == nil {
		t.Fatalf("skill %v", s)
	}
}

// An attempt that read its pack's assets replays identical (the read is
// served from the trace).
func TestAssetReadReplays(t *testing.T) {
	f := newFixture(t)
	f.install(t, packSpec{name: "local.assets", version: "1.0.0", module: "testdata/modules/assets.wasm", abiMinor: 1,
		assets: map[string]string{"SKILL.md": "# Skill\n"},
		nodes:  `[{"typeId":"assets.skill","kind":"node"},{"typeId":"assets.missing","kind":"node"}]`})
	for _, node := range []string{"assets.skill", "assets.missing"} {
		inv, err := f.Invoke(ctx, "local.assets", InvokeRequest{Node: node})
		if err != nil {
			t.Fatal(err)
		}
		if inv.Attempt.Outcome != "completed" {
			t.Fatalf("%s: %s %+v", node, inv.Attempt.Outcome, inv.Attempt.Error)
		}
		v, err := f.Replay(ctx, inv.Attempt.AttemptID, ReplayOptions{})
		if err != nil || !v.Identical {
			t.Fatalf("replay %s: %+v %v", node, v, err)
		}
	}
}
