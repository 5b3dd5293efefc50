package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Memory checks host.Memory: put, get, replace and delete, validation
// naming the field, TTLs against the store's clock, listing by prefix,
// and tenant isolation (another tenant's key answers exactly like a key
// that exists nowhere).
func Memory(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"Basics", memoryBasics},
		{"Validation", memoryValidation},
		{"TTL", memoryTTL},
		{"Sweep", memorySweep},
		{"List", memoryList},
		{"TenantIsolation", memoryTenantIsolation},
	})
}

func (f *fixture) put(sc host.Scope, key, value string, opts host.PutOptions) {
	f.t.Helper()
	if err := f.b.Put(ctx, sc, key, json.RawMessage(value), opts); err != nil {
		f.t.Fatalf("put %s: %v", key, err)
	}
}

func (f *fixture) list(sc host.Scope, prefix string) []string {
	f.t.Helper()
	keys, err := f.b.List(ctx, sc, prefix)
	if err != nil {
		f.t.Fatalf("list %q: %v", prefix, err)
	}
	return keys
}

func memoryBasics(f *fixture) {
	t := f.t
	sc := host.Scope{Tenant: "acme", Namespace: "notes"}
	f.put(sc, "k1", `{"v": 1}`, host.PutOptions{})
	e, err := f.b.Get(ctx, sc, "k1")
	if err != nil || e.Key != "k1" || string(e.Value) != `{"v":1}` && string(e.Value) != `{"v": 1}` || e.Secret || e.ExpiresAt != nil || !e.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("get: %+v %v", e, err)
	}
	f.clock.Add(time.Second)
	f.put(sc, "k1", `2`, host.PutOptions{Secret: true})
	if e, err = f.b.Get(ctx, sc, "k1"); err != nil || string(e.Value) != "2" || !e.Secret || !e.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("replace: %+v %v", e, err)
	}
	// Another namespace of the same tenant is apart.
	_, err = f.b.Get(ctx, host.Scope{Tenant: "acme", Namespace: "other"}, "k1")
	wantErr(t, err, host.ErrNotFound)
	if err := f.b.Delete(ctx, sc, "k1"); err != nil {
		t.Fatal(err)
	}
	_, err = f.b.Get(ctx, sc, "k1")
	wantErr(t, err, host.ErrNotFound)
	wantErr(t, f.b.Delete(ctx, sc, "k1"), host.ErrNotFound)
	// Values are any JSON.
	for _, v := range []string{`"s"`, `[1,2]`, `null`, `true`, `1.5`} {
		f.put(sc, "v", v, host.PutOptions{})
		if e, err := f.b.Get(ctx, sc, "v"); err != nil || string(e.Value) != v {
			t.Fatalf("value %s read back as %s (%v)", v, e.Value, err)
		}
	}
}

func memoryValidation(f *fixture) {
	t := f.t
	sc := host.Scope{Tenant: "acme", Namespace: "notes"}
	for _, tt := range []struct {
		name  string
		call  func() error
		field string
	}{
		{"no tenant", func() error { _, err := f.b.Get(ctx, host.Scope{Namespace: "n"}, "k"); return err }, "tenant"},
		{"no namespace", func() error { _, err := f.b.Get(ctx, host.Scope{Tenant: "t"}, "k"); return err }, "namespace"},
		{"empty key", func() error { return f.b.Put(ctx, sc, "", json.RawMessage(`1`), host.PutOptions{}) }, "key"},
		{"control char", func() error { return f.b.Put(ctx, sc, "a\nb", json.RawMessage(`1`), host.PutOptions{}) }, "key"},
		{"invalid UTF-8", func() error { return f.b.Delete(ctx, sc, "\xff") }, "key"},
		{"long key", func() error {
			return f.b.Put(ctx, sc, strings.Repeat("k", host.MaxKeyBytes+1), json.RawMessage(`1`), host.PutOptions{})
		}, "key"},
		{"long namespace", func() error {
			return f.b.Put(ctx, host.Scope{Tenant: "t", Namespace: strings.Repeat("n", host.MaxScopeNameBytes+1)}, "k", json.RawMessage(`1`), host.PutOptions{})
		}, "namespace"},
		{"bad prefix", func() error { _, err := f.b.List(ctx, sc, "a\x00"); return err }, "prefix"},
		{"bad JSON", func() error { return f.b.Put(ctx, sc, "k", json.RawMessage(`{`), host.PutOptions{}) }, "value"},
		{"empty value", func() error { return f.b.Put(ctx, sc, "k", nil, host.PutOptions{}) }, "value"},
		{"negative TTL", func() error { return f.b.Put(ctx, sc, "k", json.RawMessage(`1`), host.PutOptions{TTL: -1}) }, "ttl"},
	} {
		err := tt.call()
		var he *host.Error
		if !errors.As(err, &he) || he.Field != tt.field {
			t.Fatalf("%s: %v, want an error naming %q", tt.name, err, tt.field)
		}
		wantErr(t, err, host.ErrValidation)
	}
	if keys := f.list(sc, ""); len(keys) != 0 {
		t.Fatalf("refused puts stored %v", keys)
	}
}

func memoryTTL(f *fixture) {
	t := f.t
	sc := host.Scope{Tenant: "acme", Namespace: "cache"}
	f.put(sc, "short", `1`, host.PutOptions{TTL: time.Minute})
	f.put(sc, "long", `2`, host.PutOptions{TTL: time.Hour})
	f.put(sc, "forever", `3`, host.PutOptions{})
	e, err := f.b.Get(ctx, sc, "short")
	if err != nil || e.ExpiresAt == nil || !e.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("%+v %v", e, err)
	}
	f.clock.Add(time.Minute - time.Millisecond)
	if _, err := f.b.Get(ctx, sc, "short"); err != nil {
		t.Fatalf("expired before its time: %v", err)
	}
	f.clock.Add(time.Millisecond) // expiry is exclusive: at expires_at the entry is gone
	for _, tt := range []struct {
		key   string
		found bool
	}{{"short", false}, {"long", true}, {"forever", true}} {
		_, err := f.b.Get(ctx, sc, tt.key)
		if (err == nil) != tt.found {
			t.Fatalf("get %s after 1m: %v", tt.key, err)
		}
		if !tt.found {
			wantErr(t, err, host.ErrNotFound)
		}
	}
	if keys := f.list(sc, ""); !reflect.DeepEqual(keys, []string{"forever", "long"}) {
		t.Fatalf("list after expiry: %v", keys)
	}
	// An expired entry deletes like a missing one.
	wantErr(t, f.b.Delete(ctx, sc, "short"), host.ErrNotFound)
	// Re-putting an expired key makes it live again, without the old TTL.
	f.clock.Add(2 * time.Hour)
	f.put(sc, "long", `5`, host.PutOptions{})
	if e, err := f.b.Get(ctx, sc, "long"); err != nil || e.ExpiresAt != nil || string(e.Value) != "5" {
		t.Fatalf("re-put: %+v %v", e, err)
	}
	// Replacing a live entry without a TTL drops its expiry.
	f.put(sc, "k", `1`, host.PutOptions{TTL: time.Second})
	f.put(sc, "k", `2`, host.PutOptions{})
	f.clock.Add(time.Minute)
	if e, err := f.b.Get(ctx, sc, "k"); err != nil || e.ExpiresAt != nil {
		t.Fatalf("replaced entry kept the old TTL: %+v %v", e, err)
	}
}

func memoryList(f *fixture) {
	t := f.t
	sc := host.Scope{Tenant: "acme", Namespace: "n"}
	for _, k := range []string{"b", "a/2", "a/10", "A", "a", "é", "a%", "a_"} {
		f.put(sc, k, `1`, host.PutOptions{})
	}
	if keys := f.list(sc, ""); !reflect.DeepEqual(keys, []string{"A", "a", "a%", "a/10", "a/2", "a_", "b", "é"}) {
		t.Fatalf("not sorted bytewise: %v", keys)
	}
	for prefix, want := range map[string][]string{
		"a/": {"a/10", "a/2"}, "a": {"a", "a%", "a/10", "a/2", "a_"}, "a%": {"a%"}, "a_": {"a_"}, "%": nil, "_": nil, "z": nil, "a/10": {"a/10"},
	} {
		if keys := f.list(sc, prefix); !reflect.DeepEqual(keys, want) && !(len(keys) == 0 && len(want) == 0) {
			t.Fatalf("prefix %q: %v, want %v", prefix, keys, want)
		}
	}
}

func memoryTenantIsolation(f *fixture) {
	t := f.t
	alice := host.Scope{Tenant: "alice", Namespace: "shared"}
	bob := host.Scope{Tenant: "bob", Namespace: "shared"}
	// Tenants whose names could collide if scopes were concatenated.
	others := []host.Scope{bob, {Tenant: "alice/shared", Namespace: "x"}, {Tenant: "alic", Namespace: "eshared"}, {Tenant: "alice%", Namespace: "shared"}}
	keys := []string{"secret-plan", "public"}
	// What a miss looks like before alice has anything.
	type answer struct{ get, del string }
	miss := map[host.Scope]map[string]answer{}
	for _, o := range others {
		miss[o] = map[string]answer{}
		for _, k := range keys {
			_, gerr := f.b.Get(ctx, o, k)
			derr := f.b.Delete(ctx, o, k)
			wantErr(t, gerr, host.ErrNotFound)
			wantErr(t, derr, host.ErrNotFound)
			miss[o][k] = answer{gerr.Error(), derr.Error()}
		}
	}
	for _, k := range []string{"secret-plan", "secret-plan-2", "public"} {
		f.put(alice, k, `"alice-value-`+k+`"`, host.PutOptions{Secret: true})
	}
	for _, o := range others {
		for _, k := range keys {
			_, gerr := f.b.Get(ctx, o, k)
			derr := f.b.Delete(ctx, o, k)
			if gerr == nil || derr == nil || gerr.Error() != miss[o][k].get || derr.Error() != miss[o][k].del {
				t.Fatalf("%+v %s: answers %v / %v, not the miss %q / %q", o, k, gerr, derr, miss[o][k].get, miss[o][k].del)
			}
		}
		for _, prefix := range []string{"", "s", "secret", "%", "_", "secret-plan"} {
			if got := f.list(o, prefix); len(got) != 0 {
				t.Fatalf("list %q as %+v: %v", prefix, o, got)
			}
		}
		// The other tenant can use the same key names independently.
		f.put(o, "secret-plan", `"mine"`, host.PutOptions{})
		if e, err := f.b.Get(ctx, o, "secret-plan"); err != nil || string(e.Value) != `"mine"` {
			t.Fatalf("got %+v %v", e, err)
		}
		if err := f.b.Delete(ctx, o, "secret-plan"); err != nil {
			t.Fatal(err)
		}
	}
	// Alice's data is intact, and her prefix listing is exact.
	if got := f.list(alice, "secret"); !reflect.DeepEqual(got, []string{"secret-plan", "secret-plan-2"}) {
		t.Fatalf("alice's list: %v", got)
	}
	if e, err := f.b.Get(ctx, alice, "secret-plan"); err != nil || string(e.Value) != `"alice-value-secret-plan"` || !e.Secret {
		t.Fatalf("alice's value: %+v %v", e, err)
	}
}

// memorySweep: a sweep deletes the expired entries of every tenant, and
// only those, giving their bytes back to the namespace.
func memorySweep(f *fixture) {
	t := f.t
	a, b := host.Scope{Tenant: "acme", Namespace: "cache"}, host.Scope{Tenant: "other", Namespace: "cache"}
	f.put(a, "short", `"x"`, host.PutOptions{TTL: time.Second})
	f.put(b, "short", `"y"`, host.PutOptions{TTL: time.Second})
	f.put(a, "long", `1`, host.PutOptions{TTL: time.Hour})
	f.put(a, "forever", `2`, host.PutOptions{})
	if n, err := f.b.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before anything expired: %d %v", n, err)
	}
	f.clock.Add(2 * time.Second)
	if n, err := f.b.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("sweep: %d %v, want 2", n, err)
	}
	if n, err := f.b.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second sweep: %d %v", n, err)
	}
	if keys, err := f.b.List(ctx, a, ""); err != nil || len(keys) != 2 || keys[0] != "forever" || keys[1] != "long" {
		t.Fatalf("live keys after a sweep: %v %v", keys, err)
	}
	// A re-put of a swept key is a new entry.
	f.put(a, "short", `"z"`, host.PutOptions{})
	if e, err := f.b.Get(ctx, a, "short"); err != nil || string(e.Value) != `"z"` {
		t.Fatalf("re-put after a sweep: %+v %v", e, err)
	}
}
