package host

import (
	"errors"
	"strings"
	"testing"
)

const goodAgent = `{"agent":{"agent_id":"arc","internal_name":"arc","display_name":"Arc","onchain_identity":{"contract":"SP1.identity-registry"}},
	"wallets":[{"agent_id":"arc","chain":"stacks","address":"SP1","onchain_identity_contract":"SP1.identity-registry"}],
	"constitution":{"agent_id":"arc","soul_path":"SOUL.md","purpose_path":"PURPOSE.md","soul_hash":"sha256:` + hex64 + `","purpose_hash":"sha256:` + hex64 + `","version":"1","revised_at":"2026-01-01"}}`

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

const goodProfile = `{"profile_id":"writer","style":"claude-like","role":"writes","default_adapter_id":"echo","prompt_parts":["be brief"],"skill_ids":["greeting"],
	"context_policy":{"max_prompt_chars":100,"include_recent_memory":true},"result_policy":{"allow_follow_up_tasks":false,"allow_external_messages":false}}`

func TestDecodeAgentRecord(t *testing.T) {
	rec, err := DecodeAgentRecord([]byte(goodAgent))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Agent.AgentID != "arc" || len(rec.Wallets) != 1 || rec.Constitution == nil || !strings.HasPrefix(rec.Constitution.Hash(), "sha256:") {
		t.Fatalf("record %+v", rec)
	}
	for _, c := range []struct{ from, to, field string }{
		{`"agent_id":"arc","internal_name":"arc"`, `"agent_id":"arc","internal_name":"loom"`, "agent.agent_id"},
		{`"display_name":"Arc"`, `"display_name":""`, "agent.display_name"},
		{`"onchain_identity_contract":"SP1.identity-registry"`, `"onchain_identity_contract":"SP2.other"`, "wallets[0].onchain_identity_contract"},
		{`"chain":"stacks","address":"SP1"`, `"chain":"stacks"`, "wallets[0].address"},
		{`"soul_hash":"sha256:`, `"soul_hash":"md5:`, "constitution.soul_hash"},
		{`"constitution":{"agent_id":"arc"`, `"constitution":{"agent_id":"loom"`, "constitution.agent_id"},
		{`{"agent":`, `{"agnet":{},"agent":`, "agnet"},
	} {
		_, err := DecodeAgentRecord([]byte(strings.Replace(goodAgent, c.from, c.to, 1)))
		var he *Error
		if !errors.As(err, &he) || he.Field != c.field || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s -> %s: %v (field %q), want field %s", c.from, c.to, err, fieldOf(he), c.field)
		}
	}
}

func TestDecodeProfileAndSpec(t *testing.T) {
	p, err := DecodeProfile([]byte(goodProfile))
	if err != nil || p.ContextPolicy.MaxPromptChars != 100 || p.ResultPolicy.AllowFollowUpTasks {
		t.Fatalf("profile %+v %v", p, err)
	}
	_, err = DecodeProfile([]byte(strings.Replace(goodProfile, `"claude-like"`, `"gpt-like"`, 1)))
	var he *Error
	if !errors.As(err, &he) || he.Field != "style" {
		t.Fatalf("bad style: %v", err)
	}
	if _, err := DecodeTaskTypeSpec([]byte(`{"task_type":"t","payload_schema_id":"x","artifact_roles":["execute-report"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeTaskTypeSpec([]byte(`{"task_type":"t"}`)); !errors.As(err, &he) || he.Field != "payload_schema_id" {
		t.Fatalf("no payload_schema_id: %v", err)
	}
}

func FuzzDecodeAgentRecord(f *testing.F) {
	f.Add([]byte(goodAgent))
	f.Add([]byte(goodProfile))
	f.Fuzz(func(t *testing.T, b []byte) {
		if rec, err := DecodeAgentRecord(b); err == nil && rec.Agent.AgentID != rec.Agent.InternalName {
			t.Fatalf("accepted %+v", rec)
		}
		if p, err := DecodeProfile(b); err == nil && p.ProfileID == "" {
			t.Fatal("accepted a profile without an id")
		}
		DecodeTaskTypeSpec(b)
	})
}

// An agent's messaging identity: an Ed25519 key as "ed25519:<base64>" and
// topic patterns; anything else is refused naming the field.
func TestDecodeAgentMessaging(t *testing.T) {
	key := "ed25519:" + strings.Repeat("A", 43) + "="
	doc := strings.TrimSuffix(goodAgent, "}") + `,"messaging":{"public_key":"` + key + `","topics":["crisis.*","query"]}}`
	rec, err := DecodeAgentRecord([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if k, ok, err := rec.Messaging.Ed25519Key(); err != nil || !ok || len(k) != 32 || len(rec.Messaging.Topics) != 2 {
		t.Fatalf("messaging %+v: %v", rec.Messaging, err)
	}
	for _, c := range []struct{ from, to, field string }{
		{key, "rsa:AAAA", "messaging.public_key"},
		{key, "ed25519:AAAA", "messaging.public_key"},
		{`"crisis.*"`, `"crisis.*.x"`, "messaging.topics[0]"},
		{`"topics"`, `"topicz"`, "messaging"},
	} {
		_, err := DecodeAgentRecord([]byte(strings.Replace(doc, c.from, c.to, 1)))
		var he *Error
		if !errors.As(err, &he) || he.Field != c.field {
			t.Errorf("%s -> %s: %v (field %q), want field %s", c.from, c.to, err, fieldOf(he), c.field)
		}
	}
}

// An agent_id is a sender id: registration applies the one sender
// grammar (internal/message.CheckSenderID), so no registered agent is a
// look-alike of another (issue 29, finding 7).
func TestDecodeAgentRecordRefusesLookAlikeIDs(t *testing.T) {
	// The schema's pattern refuses non-ASCII; the grammar adds case and
	// trailing separators.
	for _, id := range []string{"Arc", "ARC", "arc.", "arc-", "arc_", "ѕarc", "arc\u200b"} {
		doc := strings.ReplaceAll(goodAgent, `"arc"`, `"`+id+`"`)
		_, err := DecodeAgentRecord([]byte(doc))
		var he *Error
		if !errors.As(err, &he) || he.Field != "agent.agent_id" && he.Field != "agent.internal_name" || strings.Contains(err.Error(), "\n") {
			t.Errorf("agent_id %q: %v (field %q), want a refusal of agent.agent_id", id, err, fieldOf(he))
		}
	}
}
