package schema

import (
	"errors"
	"testing"
)

const (
	hashA = "0000000000000000000000000000000000000000000000000000000000000000"
	hashB = "1111111111111111111111111111111111111111111111111111111111111111"
)

// records are a well-formed example of each record of this package's
// task, attempt, outcome, artifact, workflow and event schemas (field
// names as seed 003 writes them).
var records = map[string]string{
	"agent-runtime/task.outcome/v1": `{"status":"completed","machine_status":"ok","operator_summary":"formatted 2 files",
		"raw_output":"{}","file_changes":["src/a.go"],"artifact_paths":["out/report.md"],"workflow_signal":"verified",
		"follow_up_tasks":[{"task_type":"notify","source":"task:t1","payload":{"to":"ops"}}],"external_messages":[{"channel":"ops"}]}`,
	"agent-runtime/task.record/v1": `{"task_id":"task_1","task_type":"demo.greet","source":"operator","subject":null,"description":null,
		"priority":5,"payload":{"name":"Ada"},"requested_profile_id":"","requested_adapter_id":null,"requested_model":null,
		"status":"completed","max_attempts":3,"attempt_count":1,"available_at":"2026-01-02T15:04:05Z","created_at":"2026-01-02T15:04:05Z",
		"updated_at":"2026-01-02T15:04:06Z","started_at":"2026-01-02T15:04:05Z","finished_at":"2026-01-02T15:04:06Z",
		"outcome":{"status":"completed","machine_status":"ok","operator_summary":"completed"},"last_error":null,"tenant":"default"}`,
	"agent-runtime/task.attempt/v1": `{"attempt_id":"att_1","task_id":"task_1","adapter_id":"claude","adapter_kind":"claude-code","model":null,
		"runner_id":"vm-1","started_at":"2026-01-02T15:04:05Z","ended_at":null,"exit_status":"ok","retry_class":"none",
		"stdout_path":"runs/1/stdout.txt","diagnostics":{"tokens":10}}`,
	"agent-runtime/artifact.record/v1": `{"artifact_id":"art_1","task_id":"task_1","role":"verify-report","relative_path":"reports/verify.md",
		"content_type":"text/markdown","created_at":"2026-01-02T15:04:05Z","verified_at":"2026-01-02T15:05:00Z"}`,
	"agent-runtime/workflow.definition/v1": `{"workflow_type":"goal-loop","initial_state":"plan","states":[
		{"state_id":"plan","task_type":"goal.plan","transitions":[{"signal":"planned","next_state":"execute"}],"emits_task_intent":true},
		{"state_id":"execute","task_type":"goal.execute","default_skill_ids":["code.edit"],"transitions":[{"signal":"done","next_state":"verify"}]},
		{"state_id":"verify","task_type":"goal.verify","transitions":[{"signal":"failed","next_state":"execute"}],"completion_signals":["verified"]},
		{"state_id":"complete"}]}`,
	"agent-runtime/workflow.record/v1": `{"workflow_id":"wf_1","workflow_type":"goal-loop","instance_key":"issue-16","current_state":"execute",
		"context":{"goal":"ship"},"status":"active","created_at":"2026-01-02T15:04:05Z","updated_at":"2026-01-02T15:04:05Z","completed_at":null}`,
	"agent-runtime/runtime.event/v1": `{"seq":7,"time":"2026-01-02T15:04:05Z","type":"task_started","task_id":"task_1","attempt_id":"att_1",
		"data":{"attempt":1},"prev_hash":"` + hashA + `","hash":"` + hashB + `"}`,
}

func TestRecordExamplesValidate(t *testing.T) {
	for id, doc := range records {
		if err := Validate(id, []byte(doc)); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// A broken record is refused with the path of the value at fault.
func TestBrokenRecordsNameThePath(t *testing.T) {
	for _, c := range []struct{ id, doc, path string }{
		{"agent-runtime/task.outcome/v1", `{"status":"completed","machine_status":"failed","operator_summary":"x"}`, "machine_status"},
		{"agent-runtime/task.outcome/v1", `{"status":"done","machine_status":"ok","operator_summary":"x"}`, "status"},
		{"agent-runtime/task.outcome/v1", `{"status":"blocked","machine_status":"blocked"}`, "operator_summary"},
		{"agent-runtime/task.outcome/v1", `{"status":"completed","machine_status":"ok","operator_summary":"x","follow_up_tasks":[{"source":"s","payload":{}}]}`, "follow_up_tasks[].task_type"},
		{"agent-runtime/task.outcome/v1", `{"status":"completed","machine_status":"ok","operator_summary":"x","external_messages":["hi"]}`, "external_messages[]"},
		{"agent-runtime/task.record/v1", `{"task_id":"t"}`, "task_type"},
		{"agent-runtime/task.record/v1", replace(records["agent-runtime/task.record/v1"], `"priority":5`, `"priority":"high"`), "priority"},
		{"agent-runtime/task.record/v1", replace(records["agent-runtime/task.record/v1"], `"tenant":"default"`, `"tenant":"default","lease":1`), "lease"},
		{"agent-runtime/task.attempt/v1", replace(records["agent-runtime/task.attempt/v1"], `"exit_status":"ok"`, `"exit_status":"crashed"`), "exit_status"},
		{"agent-runtime/task.attempt/v1", replace(records["agent-runtime/task.attempt/v1"], `"adapter_id":"claude",`, ``), "adapter_id"},
		{"agent-runtime/artifact.record/v1", replace(records["agent-runtime/artifact.record/v1"], `"verify-report"`, `"log"`), "role"},
		{"agent-runtime/workflow.definition/v1", `{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","transitions":[{"signal":"s"}]}]}`, "states[].transitions[].next_state"},
		{"agent-runtime/workflow.record/v1", replace(records["agent-runtime/workflow.record/v1"], `"active"`, `"paused"`), "status"},
		{"agent-runtime/runtime.event/v1", replace(records["agent-runtime/runtime.event/v1"], `"task_started"`, `"Task Started"`), "type"},
		{"agent-runtime/runtime.event/v1", replace(records["agent-runtime/runtime.event/v1"], `"seq":7`, `"seq":0`), "seq"},
	} {
		err := Validate(c.id, []byte(c.doc))
		var e *Error
		if !errors.As(err, &e) || e.Path != c.path {
			t.Errorf("%s %.80s: got %v (path %q), want path %q", c.id, c.doc, err, pathOf(e), c.path)
		}
	}
}

// Each record of seed 003 owned by the skills work: a well-formed example
// validates, a broken one is refused at the right path.
func TestRecordSchemas(t *testing.T) {
	for _, c := range []struct {
		id, good, bad, path string
	}{
		{"agent-runtime/skill.manifest/v1",
			`{"skill_id":"greeting","description":"greets","tags":["demo"],"instruction_path":"SKILL.md","cli_commands":[{"name":"greet","command":"packrun invoke x"}]}`,
			`{"skill_id":"greeting","description":"greets","instruction_path":"SKILL.md","cli_commands":[{"name":"greet"}]}`, "cli_commands[].command"},
		{"agent-runtime/agent.identity/v1",
			`{"agent_id":"arc","internal_name":"arc","display_name":"Arc","external_name":{"name":"Trustless Indra","source":"aibtc-api","wallet_ref":"bc1q"},"onchain_identity":{"contract":"SP1.identity-registry"}}`,
			`{"agent_id":"arc","internal_name":"arc","display_name":"Arc","external_name":{"name":"x","source":"dns","wallet_ref":"bc1q"}}`, "external_name.source"},
		{"agent-runtime/wallet.identity/v1",
			`{"agent_id":"arc","chain":"stacks","network":"mainnet","address":"SP1","capabilities":["sign"]}`,
			`{"agent_id":"arc","chain":"stacks"}`, "address"},
		{"agent-runtime/agent.constitution/v1",
			`{"agent_id":"arc","soul_path":"SOUL.md","purpose_path":"PURPOSE.md","soul_hash":"sha256:` + hex64 + `","purpose_hash":"sha256:` + hex64 + `","version":"1","revised_at":"2026-01-01T00:00:00Z"}`,
			`{"agent_id":"arc","soul_path":"SOUL.md","purpose_path":"PURPOSE.md","soul_hash":"md5:x","purpose_hash":"sha256:` + hex64 + `","version":"1","revised_at":"x"}`, "soul_hash"},
		{"agent-runtime/agent.profile/v1",
			`{"profile_id":"writer","style":"claude-like","role":"writes","default_adapter_id":"claude","prompt_parts":["be brief"],"skill_ids":["greeting"],"context_policy":{"max_prompt_chars":2000,"include_recent_memory":false},"result_policy":{"allow_follow_up_tasks":true,"allow_external_messages":false}}`,
			`{"profile_id":"writer","style":"claude-like","role":"writes","default_adapter_id":"claude","prompt_parts":[],"skill_ids":[],"context_policy":{"max_prompt_chars":-1,"include_recent_memory":false},"result_policy":{"allow_follow_up_tasks":true,"allow_external_messages":false}}`, "context_policy.max_prompt_chars"},
		{"agent-runtime/task.type/v1",
			`{"task_type":"hello.wat","payload_schema_id":"inputSchema","default_model":"m","allowed_skill_ids":["greeting"],"success_policy":{"require_adapter_audit":true}}`,
			`{"task_type":"hello.wat","payload_schema_id":"x","success_policy":{"require_everything":true}}`, "success_policy.require_everything"},
		{"agent-runtime/adapter.config/v1",
			`{"adapter_id":"codex","kind":"codex","command":"codex","timeout_ms":60000,"model":"gpt-5-codex","models":["gpt-5-mini"],"autonomy":{"profile":"restricted","required_args":["exec"]}}`,
			`{"adapter_id":"codex","kind":"codex","command":"codex"}`, "timeout_ms"},
	} {
		if err := Validate(c.id, []byte(c.good)); err != nil {
			t.Errorf("%s: well-formed example refused: %v", c.id, err)
		}
		err := Validate(c.id, []byte(c.bad))
		var e *Error
		if !errors.As(err, &e) || e.Path != c.path {
			t.Errorf("%s: broken example: %v (path %q), want path %q", c.id, err, pathOf(e), c.path)
		}
	}
}

func replace(s, old, new string) string {
	for i := 0; i+len(old) <= len(s); i++ {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("no " + old)
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
