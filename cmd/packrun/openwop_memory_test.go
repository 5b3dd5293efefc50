package main

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOpenwopMemoryScenarios ports openwop's four agent memory scenarios
// (agentMemoryRoundTrip@5f098ffeb0, agentMemoryTtlExpiry@9db354d7a8,
// agentMemoryCrossTenantIsolation@ecd58732e5,
// agentMemoryRedactionContract@8706e2dd98) against a live serve: each is
// gated on discovery's agents.memoryBackends holding "long-term" and on
// its fixture being advertised, runs it to completed and reads the run
// variables it sets. Beyond them: the entries are the tenant's key-value
// memory (read back through /v1/memory), another tenant's entries stay
// invisible, a tenant's own secret is redacted by its id, and bad input
// is a 400 in openwop's envelope.
func TestOpenwopMemoryScenarios(t *testing.T) {
	h, serve := openwopServe(t, "invoke,tasks:read,tasks:write")
	_, o := serve()
	other := openwopHost{base: o.base, key: newToken(h, "other", "invoke,tasks:read,tasks:write"), h: h}

	// multi-agent-capabilities.ts hasLongTermMemory, read without a token.
	res, d := anonGet(t, o.base+"/.well-known/openwop")
	agents, _ := d["agents"].(map[string]any)
	if mb, _ := agents["memoryBackends"].([]any); res.StatusCode != http.StatusOK || !slices.Contains(mb, any("long-term")) {
		t.Fatalf("discovery agents %v (%d)", d["agents"], res.StatusCode)
	}
	run := func(t *testing.T, o openwopHost, wf string, inputs any) map[string]any {
		t.Helper()
		o.advertised(t, wf)
		runID := o.startRun(t, wf, inputs)
		if v := o.pollUntilTerminal(t, runID); v["status"] != "completed" {
			t.Fatalf("%s: %v", wf, v)
		}
		code, snap := o.do(t, "GET", "/v1/runs/"+runID, nil)
		vars, _ := snap["variables"].(map[string]any)
		if code != http.StatusOK || vars == nil {
			t.Fatalf("run snapshot: %d %v", code, snap)
		}
		return vars
	}
	entryShaped := func(t *testing.T, v any) map[string]any {
		t.Helper()
		e, _ := v.(map[string]any)
		_, tags := e["tags"].([]any)
		for _, f := range []string{"id", "content", "createdAt"} {
			if _, ok := e[f].(string); !ok || !tags {
				t.Fatalf("not a MemoryEntry: %v", v)
			}
		}
		return e
	}

	t.Run("agentMemoryRoundTrip", func(t *testing.T) {
		vars := run(t, o, "conformance-agent-memory-roundtrip", nil)
		e := entryShaped(t, vars["memoryReadback"])
		// No second store: the entry is the tenant's memory entry, keyed
		// by its id, in the namespace its memoryRef resolves to.
		mk := newToken(h, "default", "memory:read")
		code, text := get(t, "GET", o.base+"/v1/memory/openwop-memory.agent-memory-roundtrip/"+e["id"].(string), mk, "")
		if code != http.StatusOK || !strings.Contains(text, e["content"].(string)) {
			t.Fatalf("entry through /v1/memory: %d %s", code, text)
		}
		om := newToken(h, "other", "memory:read")
		if code, text := get(t, "GET", o.base+"/v1/memory/openwop-memory.agent-memory-roundtrip/"+e["id"].(string), om, ""); code != http.StatusNotFound {
			t.Fatalf("another tenant reads the entry: %d %s", code, text)
		}
	})

	t.Run("agentMemoryTtlExpiry", func(t *testing.T) {
		vars := run(t, o, "conformance-agent-memory-ttl", nil)
		l, ok := vars["memoryList"].([]any)
		if !ok {
			t.Fatalf("memoryList %v", vars["memoryList"])
		}
		var ids []any
		for _, v := range l {
			e := entryShaped(t, v)
			ids = append(ids, e["id"])
			if s, ok := e["expiresAt"].(string); ok {
				if at, err := time.Parse(time.RFC3339Nano, s); err != nil || !at.After(time.Now()) {
					t.Errorf("listed entry expires at %s", s)
				}
			}
		}
		if !slices.Contains(ids, vars["freshId"]) || slices.Contains(ids, vars["expiredId"]) || vars["expiredId"] == nil {
			t.Fatalf("fresh %v, expired %v, listed %v", vars["freshId"], vars["expiredId"], ids)
		}
	})

	t.Run("agentMemoryCrossTenantIsolation", func(t *testing.T) {
		const wf = "conformance-agent-memory-cross-tenant"
		// Tenant other writes under the same memory name first: there
		// is something to leak.
		theirs := run(t, other, wf, map[string]any{"foreignTenant": "default"})
		vars := run(t, o, wf, map[string]any{"foreignTenant": "other"})
		owner, _ := vars["ownerProbe"].([]any)
		var ids []any
		for _, v := range owner {
			ids = append(ids, entryShaped(t, v)["id"])
		}
		if len(owner) == 0 || !slices.Contains(ids, vars["ownerEntryId"]) || slices.Contains(ids, theirs["ownerEntryId"]) {
			t.Fatalf("ownerProbe %v (ownerEntryId %v, other's %v)", ids, vars["ownerEntryId"], theirs["ownerEntryId"])
		}
		if cross, ok := vars["crossTenantProbe"].([]any); !ok || len(cross) != 0 {
			t.Fatalf("crossTenantProbe %v", vars["crossTenantProbe"])
		}
		// The default foreign tenant, and the variable of the wrong type.
		run(t, o, wf, nil)
		a := owCall(t, o.base, o.key, "POST", "/v1/runs", `{"workflowId":"`+wf+`","inputs":{"foreignTenant":5}}`)
		if a.code != http.StatusBadRequest || !strings.Contains(a.text, "foreignTenant") {
			t.Fatalf("foreignTenant 5: %d %s", a.code, a.text)
		}
		owEnvelope(t, a)
		// Probing the run's own tenant as foreign proves nothing: refused.
		runID := o.startRun(t, wf, map[string]any{"foreignTenant": "default"})
		v := o.pollUntilTerminal(t, runID)
		if e, _ := v["error"].(map[string]any); v["status"] != "failed" || !strings.Contains(e["message"].(string), "foreignTenant") {
			t.Fatalf("own tenant as foreign: %v", v)
		}
	})

	t.Run("agentMemoryRedactionContract", func(t *testing.T) {
		const wf = "conformance-agent-memory-redaction"
		marker := regexp.MustCompile(`\[REDACTED:[^\]]+\]`)
		// No tenant secret conformance-byok: a run-scope value, redacted.
		vars := run(t, o, wf, nil)
		if c, _ := entryShaped(t, vars["memoryReadback"])["content"].(string); !marker.MatchString(c) || !strings.Contains(c, "[REDACTED:conformance-byok]") {
			t.Fatalf("content %q", c)
		}
		// The tenant's own secret, resolved by its id: never in the run.
		const plain = "sk-live-0123456789abcdef"
		h.ok("memory", "put", "vendor_key", `"`+plain+`"`, "--namespace", "secrets", "--secret")
		runID := o.startRun(t, wf, map[string]any{"secretId": "vendor_key"})
		if v := o.pollUntilTerminal(t, runID); v["status"] != "completed" {
			t.Fatalf("%v", v)
		}
		code, text := get(t, "GET", o.base+"/v1/runs/"+runID, o.key, "")
		if code != http.StatusOK || !strings.Contains(text, "[REDACTED:vendor_key]") || strings.Contains(text, plain) {
			t.Fatalf("snapshot: %d %s", code, text)
		}
		if _, text := get(t, "GET", o.base+"/v1/runs/"+runID+"/events", o.key, ""); strings.Contains(text, plain) {
			t.Fatalf("the plaintext is in the run's events")
		}
		a := owCall(t, o.base, o.key, "POST", "/v1/runs", `{"workflowId":"`+wf+`","inputs":{"secretId":["x"]}}`)
		if a.code != http.StatusBadRequest || !strings.Contains(a.text, "secretId") {
			t.Fatalf("secretId [x]: %d %s", a.code, a.text)
		}
		owEnvelope(t, a)
	})
}
