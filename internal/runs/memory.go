package runs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
)

// openwop's agent memory (spec/v1 agent-memory.md) on packrun's key-value
// memory, no second store. A memoryRef is "tenant/<tenant>/memory/<name>"
// (the tenant path-escaped): it resolves to the namespace
// MemoryNamespacePrefix+name of that tenant, and only for a run of that
// tenant; any other ref, another tenant's included, resolves to nothing
// (CTI-1: refused by its shape, never looked up). A MemoryEntry is a
// memory entry keyed by its id whose value is {content, tags, createdAt,
// expiresAt?}; its expiresAt is also the entry's TTL, and a read leaves
// out an entry past it either way. The four probe nodes below are
// openwop's agent memory fixtures: each writes and reads back in its run's
// tenant and sets the run variables the scenarios read, as its output's
// "variables" (GetRun shows them as the run's variables).

// Core memory node types, one per openwop agent memory fixture.
const (
	CoreMemoryRoundTrip   = "core.memory.roundtrip"
	CoreMemoryTTL         = "core.memory.ttl"
	CoreMemoryCrossTenant = "core.memory.crossTenant"
	CoreMemoryRedaction   = "core.memory.redaction"
)

// MemoryNamespacePrefix starts the namespace a memoryRef resolves to.
const MemoryNamespacePrefix = "openwop-memory."

// memoryEntryTTL is how long a probe's (unexpired) entries live.
const memoryEntryTTL = time.Hour

// minRedactBytes is SR-1's floor: a shorter secret value is not redacted.
const minRedactBytes = 8

// Error codes of the memory nodes.
const (
	MemoryReadbackCode = "memory_readback_failed"
	MemoryTTLCode      = "memory_ttl_violated"
	MemoryLeakCode     = "memory_cross_tenant_leak"
	MemoryRedactCode   = "memory_redaction_failed"
)

// memoryFixtures are openwop's agent memory fixtures: always runnable.
var memoryFixtures = []host.OpenwopWorkflow{
	{WorkflowID: "conformance-agent-memory-roundtrip", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory", TypeID: CoreMemoryRoundTrip}}},
	{WorkflowID: "conformance-agent-memory-ttl", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory", TypeID: CoreMemoryTTL}}},
	{WorkflowID: "conformance-agent-memory-cross-tenant", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory", TypeID: CoreMemoryCrossTenant,
		Inputs: map[string]host.OpenwopPort{"foreignTenant": {Type: "variable", VariableName: "foreignTenant"}}}},
		Variables: []host.OpenwopVariable{{Name: "foreignTenant", Type: "string", DefaultValue: json.RawMessage(`"conformance-foreign-tenant"`)}}},
	{WorkflowID: "conformance-agent-memory-redaction", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory", TypeID: CoreMemoryRedaction,
		Inputs: map[string]host.OpenwopPort{"secretId": {Type: "variable", VariableName: "secretId"}}}},
		Variables: []host.OpenwopVariable{{Name: "secretId", Type: "string", DefaultValue: json.RawMessage(`"conformance-byok"`)}}},
}

// isMemoryNode reports whether typeID is a core memory node type.
func isMemoryNode(typeID string) bool {
	switch typeID {
	case CoreMemoryRoundTrip, CoreMemoryTTL, CoreMemoryCrossTenant, CoreMemoryRedaction:
		return true
	}
	return false
}

// MemoryEntry is openwop's MemoryEntry (schemas/memory-entry.schema.json).
type MemoryEntry struct {
	ID        string     `json:"id"`
	Content   string     `json:"content"`
	Tags      []string   `json:"tags"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// memoryValue is a MemoryEntry as kept in memory (its id is the key).
type memoryValue struct {
	Content   string     `json:"content"`
	Tags      []string   `json:"tags"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// MemoryRef is the memoryRef of tenant's memory name.
func MemoryRef(tenant, name string) string {
	return "tenant/" + url.PathEscape(tenant) + "/memory/" + name
}

// ResolveMemoryRef is the scope ref names for a run of tenant; false
// when ref is malformed or names another tenant (CTI-1).
func ResolveMemoryRef(tenant, ref string) (host.Scope, bool) {
	rest, ok := strings.CutPrefix(ref, "tenant/")
	if !ok {
		return host.Scope{}, false
	}
	t, name, ok := strings.Cut(rest, "/memory/")
	if !ok || t != url.PathEscape(tenant) || !validMemoryName(name) {
		return host.Scope{}, false
	}
	sc := host.Scope{Tenant: tenant, Namespace: MemoryNamespacePrefix + name}
	if host.CheckScope("memory", sc) != nil {
		return host.Scope{}, false
	}
	return sc, true
}

// validMemoryName: 1..64 of [A-Za-z0-9._-], not "." or "..".
func validMemoryName(name string) bool {
	if name == "" || len(name) > 64 || name == "." || name == ".." {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// memoryAdapter is openwop's MemoryAdapter for one run's tenant, with
// the run's SR-1 registry: the secret values resolved during the run.
type memoryAdapter struct {
	mem     host.Memory
	tenant  string
	secrets map[string]string // secretId → plaintext
	now     func() time.Time
}

// redact replaces every registered secret value of at least
// minRedactBytes in s by [REDACTED:<secretId>], longest first, as
// substrings.
func (a *memoryAdapter) redact(s string) string {
	ids := make([]string, 0, len(a.secrets))
	for id, v := range a.secrets {
		if len(v) >= minRedactBytes {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		if li, lj := len(a.secrets[ids[i]]), len(a.secrets[ids[j]]); li != lj {
			return li > lj
		}
		return ids[i] < ids[j]
	})
	for _, id := range ids {
		s = strings.ReplaceAll(s, a.secrets[id], "[REDACTED:"+id+"]")
	}
	return s
}

// write persists a new entry under ref, its content redacted (SR-1).
// An expiresAt already past makes an entry that is never read.
func (a *memoryAdapter) write(ctx context.Context, ref, content string, tags []string, expiresAt *time.Time) (*MemoryEntry, error) {
	sc, ok := ResolveMemoryRef(a.tenant, ref)
	if !ok {
		return nil, fmt.Errorf("memoryRef %q does not name memory of tenant %s", ref, a.tenant)
	}
	now := a.now().UTC().Truncate(time.Millisecond)
	e := MemoryEntry{ID: host.NewID("mem"), Content: a.redact(content), Tags: tags, CreatedAt: now, ExpiresAt: expiresAt}
	ttl := memoryEntryTTL
	if expiresAt != nil {
		ttl = max(expiresAt.Sub(now), time.Nanosecond)
	}
	b, err := json.Marshal(memoryValue{Content: e.Content, Tags: e.Tags, CreatedAt: e.CreatedAt, ExpiresAt: e.ExpiresAt})
	if err != nil {
		return nil, err
	}
	if err := a.mem.Put(ctx, sc, e.ID, b, host.PutOptions{TTL: ttl}); err != nil {
		return nil, err
	}
	return &e, nil
}

// get is MemoryAdapter.get: nil for a missing, expired or foreign entry.
func (a *memoryAdapter) get(ctx context.Context, ref, id string) (*MemoryEntry, error) {
	sc, ok := ResolveMemoryRef(a.tenant, ref)
	if !ok || host.CheckKey("memory", id, false) != nil {
		return nil, nil
	}
	ent, err := a.mem.Get(ctx, sc, id)
	if errors.Is(err, host.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v memoryValue
	if ent.Secret || json.Unmarshal(ent.Value, &v) != nil || v.Tags == nil {
		return nil, nil // not a MemoryEntry: not one of this ref's entries
	}
	if v.ExpiresAt != nil && !v.ExpiresAt.After(a.now()) {
		return nil, nil
	}
	return &MemoryEntry{ID: id, Content: v.Content, Tags: v.Tags, CreatedAt: v.CreatedAt, ExpiresAt: v.ExpiresAt}, nil
}

// list is MemoryAdapter.list: ref's unexpired entries, [] for an
// unknown, malformed or foreign ref.
func (a *memoryAdapter) list(ctx context.Context, ref string) ([]MemoryEntry, error) {
	out := []MemoryEntry{}
	sc, ok := ResolveMemoryRef(a.tenant, ref)
	if !ok {
		return out, nil
	}
	keys, err := a.mem.List(ctx, sc, "")
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		e, err := a.get(ctx, ref, k)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	return out, nil
}

// resolveSecret is the run's BYOK resolution of secretId: the tenant's
// secret memory entry of that name in namespace "secrets" (a JSON
// string's text), else a value minted for this run alone (run scope).
// Either way it is registered for SR-1.
func (a *memoryAdapter) resolveSecret(ctx context.Context, secretId string) (string, error) {
	v := ""
	ent, err := a.mem.Get(ctx, host.Scope{Tenant: a.tenant, Namespace: "secrets"}, secretId)
	switch {
	case err == nil:
		if json.Unmarshal(ent.Value, &v) != nil {
			v = string(ent.Value)
		}
	case errors.Is(err, host.ErrNotFound):
		var b [16]byte
		_, _ = rand.Read(b[:])
		v = "run-secret-" + hex.EncodeToString(b[:])
	default:
		return "", err
	}
	a.secrets[secretId] = v
	return v, nil
}

// runMemory runs the memory node n of r: its output {"memoryRef",
// "variables"}, or its failure.
func (s *Scheduler) runMemory(ctx context.Context, r *host.Run, n host.OpenwopNode, input json.RawMessage) (json.RawMessage, *coreError) {
	a := &memoryAdapter{mem: s.cfg.Store, tenant: r.Tenant, secrets: map[string]string{}, now: time.Now}
	name := strings.TrimPrefix(r.WorkflowID, "conformance-")
	if !validMemoryName(name) {
		name = "conformance"
	}
	ref := MemoryRef(r.Tenant, name)
	var in struct {
		ForeignTenant string `json:"foreignTenant"`
		SecretID      string `json:"secretId"`
	}
	if len(input) > 0 && json.Unmarshal(input, &in) != nil {
		return nil, &coreError{Code: CoreInvalidInputCode, Message: n.TypeID + ": input must be an object"}
	}
	vars, fail, err := a.probe(ctx, n.TypeID, name, in.ForeignTenant, in.SecretID)
	if err != nil {
		return nil, &coreError{Code: MemoryReadbackCode, Message: fmt.Sprintf("%s: %v", n.TypeID, err)}
	}
	if fail != nil {
		return nil, fail
	}
	out, err := json.Marshal(map[string]any{"memoryRef": ref, "variables": vars})
	if err != nil {
		return nil, &coreError{Code: MemoryReadbackCode, Message: err.Error()}
	}
	return out, nil
}

// probe runs one fixture's probe against the memory name of the run's
// tenant: the run variables it sets.
// Each probe checks what it proves itself (an entry it wrote and cannot
// read back fails the node), so a broken read path never completes.
func (a *memoryAdapter) probe(ctx context.Context, typeID, name, foreignTenant, secretID string) (map[string]any, *coreError, error) {
	ref := MemoryRef(a.tenant, name)
	switch typeID {
	case CoreMemoryRoundTrip:
		exp := a.now().UTC().Add(memoryEntryTTL).Truncate(time.Millisecond)
		w, err := a.write(ctx, ref, "conformance round-trip entry, read back through its memoryRef", []string{"conformance", "memory-roundtrip"}, &exp)
		if err != nil {
			return nil, nil, err
		}
		got, err := a.get(ctx, ref, w.ID)
		if err != nil {
			return nil, nil, err
		}
		if got == nil {
			return nil, &coreError{Code: MemoryReadbackCode, Message: "entry " + w.ID + " was written to " + ref + " but reads back as null"}, nil
		}
		return map[string]any{"memoryReadback": got}, nil, nil
	case CoreMemoryTTL:
		past := a.now().UTC().Add(-time.Minute).Truncate(time.Millisecond)
		fut := a.now().UTC().Add(memoryEntryTTL).Truncate(time.Millisecond)
		expired, err := a.write(ctx, ref, "conformance ttl entry, already expired", []string{"conformance", "memory-ttl", "expired"}, &past)
		if err != nil {
			return nil, nil, err
		}
		fresh, err := a.write(ctx, ref, "conformance ttl entry, fresh", []string{"conformance", "memory-ttl", "fresh"}, &fut)
		if err != nil {
			return nil, nil, err
		}
		l, err := a.list(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		has := func(id string) bool { return slices.ContainsFunc(l, func(e MemoryEntry) bool { return e.ID == id }) }
		if has(expired.ID) || !has(fresh.ID) {
			return nil, &coreError{Code: MemoryTTLCode, Message: fmt.Sprintf("list of %s: expired entry listed %t, fresh entry listed %t", ref, has(expired.ID), has(fresh.ID))}, nil
		}
		return map[string]any{"memoryList": l, "freshId": fresh.ID, "expiredId": expired.ID}, nil, nil
	case CoreMemoryCrossTenant:
		if foreignTenant == "" || foreignTenant == a.tenant {
			return nil, &coreError{Code: CoreInvalidInputCode, Message: "core.memory.crossTenant: input foreignTenant must name a tenant other than the run's"}, nil
		}
		w, err := a.write(ctx, ref, "conformance cross-tenant owner entry", []string{"conformance", "memory-cross-tenant"}, nil)
		if err != nil {
			return nil, nil, err
		}
		owner, err := a.list(ctx, ref)
		if err != nil {
			return nil, nil, err
		}
		if !slices.ContainsFunc(owner, func(e MemoryEntry) bool { return e.ID == w.ID }) {
			return nil, &coreError{Code: MemoryReadbackCode, Message: "entry " + w.ID + " was written to " + ref + " but is not listed"}, nil
		}
		foreignRef := MemoryRef(foreignTenant, name)
		cross, err := a.list(ctx, foreignRef)
		if err != nil {
			return nil, nil, err
		}
		one, err := a.get(ctx, foreignRef, w.ID)
		if err != nil {
			return nil, nil, err
		}
		if len(cross) > 0 || one != nil {
			return nil, &coreError{Code: MemoryLeakCode, Message: "the memoryRef of tenant " + foreignTenant + " resolved to entries"}, nil
		}
		return map[string]any{"ownerProbe": owner, "ownerEntryId": w.ID, "crossTenantProbe": cross}, nil, nil
	case CoreMemoryRedaction:
		if secretID == "" || host.CheckKey("memory", secretID, false) != nil {
			return nil, &coreError{Code: CoreInvalidInputCode, Message: "core.memory.redaction: input secretId must be a memory key (1 to 512 bytes, no control characters)"}, nil
		}
		plain, err := a.resolveSecret(ctx, secretID)
		if err != nil {
			return nil, nil, err
		}
		if len(plain) < minRedactBytes {
			return nil, &coreError{Code: MemoryRedactCode, Message: fmt.Sprintf("secret %s is shorter than %d bytes: SR-1 does not redact it", secretID, minRedactBytes)}, nil
		}
		w, err := a.write(ctx, ref, "conformance redaction entry; the key resolved was "+plain+".", []string{"conformance", "memory-redaction"}, nil)
		if err != nil {
			return nil, nil, err
		}
		got, err := a.get(ctx, ref, w.ID)
		if err != nil {
			return nil, nil, err
		}
		if got == nil || strings.Contains(got.Content, plain) || !strings.Contains(got.Content, "[REDACTED:"+secretID+"]") {
			return nil, &coreError{Code: MemoryRedactCode, Message: "entry " + w.ID + " of " + ref + " does not read back redacted"}, nil
		}
		return map[string]any{"memoryReadback": got}, nil, nil
	}
	return nil, &coreError{Code: CoreInvalidInputCode, Message: typeID + " is not a memory node type"}, nil
}

// withVariables sets r.Variables, for a completed run, from the
// variables its memory nodes set (read from its log, not stored).
func (s *Scheduler) withVariables(ctx context.Context, r *host.Run) (*host.Run, error) {
	if r.Status != host.RunCompleted || !slices.ContainsFunc(memoryFixtures, func(w host.OpenwopWorkflow) bool { return w.WorkflowID == r.WorkflowID }) {
		return r, nil
	}
	evs, err := s.cfg.Store.RunEvents(ctx, r.Tenant, r.RunID)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		var v struct {
			TypeID string `json:"typeId"`
			Output struct {
				Variables map[string]json.RawMessage `json:"variables"`
			} `json:"output"`
		}
		if e.Type != host.RunEventNodeDone || json.Unmarshal(e.Payload, &v) != nil || !isMemoryNode(v.TypeID) {
			continue
		}
		if r.Variables == nil {
			r.Variables = map[string]json.RawMessage{}
		}
		for k, val := range v.Output.Variables {
			r.Variables[k] = val
		}
	}
	return r, nil
}
