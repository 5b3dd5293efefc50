package runs

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/sqlite"
)

// TestResolveMemoryRef: a memoryRef resolves only to its run's tenant's
// memory; a malformed one, or another tenant's, to nothing (CTI-1).
func TestResolveMemoryRef(t *testing.T) {
	sc, ok := ResolveMemoryRef("acme", MemoryRef("acme", "notes"))
	if !ok || sc != (host.Scope{Tenant: "acme", Namespace: MemoryNamespacePrefix + "notes"}) {
		t.Fatalf("own ref: %v %v", sc, ok)
	}
	if sc, ok := ResolveMemoryRef("a/b", MemoryRef("a/b", "n")); !ok || sc.Tenant != "a/b" {
		t.Fatalf("tenant with a slash: %v %v", sc, ok)
	}
	for _, ref := range []string{
		MemoryRef("other", "notes"), MemoryRef("a", "n"), // another tenant ("a/b" vs "a")
		"", "notes", "tenant/acme", "tenant/acme/memory/", "tenant/acme/memory/..", "tenant/acme/memory/a/b",
		"tenant/acme/memory/a\x00", "tenant/acme/memory/" + strings.Repeat("x", 65), "tenant/acme/../other/memory/n",
	} {
		if sc, ok := ResolveMemoryRef("acme", ref); ok {
			t.Errorf("%q resolved to %v", ref, sc)
		}
	}
	if _, ok := ResolveMemoryRef("a/b", MemoryRef("a", "n")); ok {
		t.Errorf("tenant a's ref resolved for tenant a/b")
	}
}

// TestMemoryRedact: SR-1 as substrings, the longest secret first, values
// under 8 bytes left alone, regex metacharacters plain text.
func TestMemoryRedact(t *testing.T) {
	a := &memoryAdapter{secrets: map[string]string{"short": "1234567", "inner": "abcdefgh", "outer": "xx-abcdefgh-yy", "meta": "a.*b(c)+$"}}
	got := a.redact("k=xx-abcdefgh-yy, abcdefgh, 1234567, a.*b(c)+$, aXXb(c)+$")
	want := "k=[REDACTED:outer], [REDACTED:inner], 1234567, [REDACTED:meta], aXXb(c)+$"
	if got != want {
		t.Fatalf("redact:\n got %s\nwant %s", got, want)
	}
}

// TestMemoryAdapter: entries round-trip through the tenant's key-value
// memory; an entry past its expiresAt is not read even while the store
// still holds it; a value that is not a MemoryEntry is not an entry; a
// foreign ref lists nothing although its tenant holds entries.
func TestMemoryAdapter(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	now := time.Now()
	a := &memoryAdapter{mem: st, tenant: "acme", secrets: map[string]string{}, now: func() time.Time { return now }}
	b := &memoryAdapter{mem: st, tenant: "rival", secrets: map[string]string{}, now: time.Now}
	ref := MemoryRef("acme", "n")
	w, err := a.write(ctx, ref, "hello", []string{"t"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := a.get(ctx, ref, w.ID); err != nil || got == nil || got.Content != "hello" || got.Tags[0] != "t" || got.ExpiresAt != nil {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := b.write(ctx, MemoryRef("rival", "n"), "theirs", []string{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.write(ctx, MemoryRef("rival", "n"), "x", []string{}, nil); err == nil {
		t.Fatalf("wrote through another tenant's ref")
	}
	// Expires in a minute by the store's clock; a's clock is moved past it.
	soon := now.Add(time.Minute)
	e, err := a.write(ctx, ref, "soon", []string{}, &soon)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, host.Scope{Tenant: "acme", Namespace: MemoryNamespacePrefix + "n"}, "plain", json.RawMessage(`"not an entry"`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, err := a.list(ctx, ref); err != nil || len(l) != 2 {
		t.Fatalf("list before expiry: %+v %v", l, err)
	}
	now = now.Add(2 * time.Minute)
	if got, err := a.get(ctx, ref, e.ID); err != nil || got != nil {
		t.Fatalf("expired entry read: %+v %v", got, err)
	}
	l, err := a.list(ctx, ref)
	if err != nil || len(l) != 1 || l[0].ID != w.ID {
		t.Fatalf("list after expiry: %+v %v", l, err)
	}
	if l, err := a.list(ctx, MemoryRef("rival", "n")); err != nil || len(l) != 0 {
		t.Fatalf("foreign list: %+v %v", l, err)
	}
	if got, err := b.get(ctx, MemoryRef("rival", "n"), w.ID); err != nil || got != nil {
		t.Fatalf("rival reads acme's entry by id: %+v %v", got, err)
	}
}

// FuzzResolveMemoryRef: whatever the ref, it resolves to nothing or to a
// namespace of the run's own tenant that MemoryRef names back; a name
// that resolves is a valid memory scope.
func FuzzResolveMemoryRef(f *testing.F) {
	for _, s := range []string{MemoryRef("acme", "notes"), MemoryRef("other", "notes"), "tenant/acme/memory/..", "tenant/acme/memory/a/b", "tenant/acme%2Fx/memory/n", "", "tenant//memory/n"} {
		f.Add("acme", s)
	}
	f.Add("a/b", "tenant/a%2Fb/memory/n")
	f.Fuzz(func(t *testing.T, tenant, ref string) {
		sc, ok := ResolveMemoryRef(tenant, ref)
		if !ok {
			return
		}
		name := strings.TrimPrefix(sc.Namespace, MemoryNamespacePrefix)
		if sc.Tenant != tenant || MemoryRef(tenant, name) != ref || !validMemoryName(name) || host.CheckScope("fuzz", sc) != nil {
			t.Fatalf("%q for tenant %q resolved to %+v", ref, tenant, sc)
		}
	})
}

// openStore opens a SQLite store of its own for the test.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "packrun.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
