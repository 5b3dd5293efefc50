package schema

import (
	"errors"
	"testing"
)

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

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
