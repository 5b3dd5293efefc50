package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

func TestMemoryBasics(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "notes"}
	if err := f.Put(ctx, sc, "k1", json.RawMessage(`{"v":1}`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	e, err := f.Get(ctx, sc, "k1")
	if err != nil || string(e.Value) != `{"v":1}` || e.Secret || e.ExpiresAt != nil || !e.UpdatedAt.Equal(f.clock.Now()) {
		t.Fatalf("get: %+v %v", e, err)
	}
	if err := f.Put(ctx, sc, "k1", json.RawMessage(`2`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	if e, _ = f.Get(ctx, sc, "k1"); string(e.Value) != "2" || !e.Secret {
		t.Fatalf("replace: %+v", e)
	}
	if err := f.Delete(ctx, sc, "k1"); err != nil {
		t.Fatal(err)
	}
	_, err = f.Get(ctx, sc, "k1")
	wantErr(t, err, host.ErrNotFound)
	wantErr(t, f.Delete(ctx, sc, "k1"), host.ErrNotFound)

	bad := []struct {
		name  string
		call  func() error
		field string
	}{
		{"no tenant", func() error { _, err := f.Get(ctx, host.Scope{Namespace: "n"}, "k"); return err }, "tenant"},
		{"no namespace", func() error { _, err := f.Get(ctx, host.Scope{Tenant: "t"}, "k"); return err }, "namespace"},
		{"empty key", func() error { return f.Put(ctx, sc, "", json.RawMessage(`1`), host.PutOptions{}) }, "key"},
		{"control char", func() error { return f.Put(ctx, sc, "a\nb", json.RawMessage(`1`), host.PutOptions{}) }, "key"},
		{"invalid UTF-8", func() error { return f.Delete(ctx, sc, "\xff") }, "key"},
		{"long key", func() error { return f.Put(ctx, sc, strings.Repeat("k", 513), json.RawMessage(`1`), host.PutOptions{}) }, "key"},
		{"bad JSON", func() error { return f.Put(ctx, sc, "k", json.RawMessage(`{`), host.PutOptions{}) }, "value"},
		{"empty value", func() error { return f.Put(ctx, sc, "k", nil, host.PutOptions{}) }, "value"},
		{"negative TTL", func() error { return f.Put(ctx, sc, "k", json.RawMessage(`1`), host.PutOptions{TTL: -1}) }, "ttl"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			wantErr(t, err, host.ErrValidation)
			if he := err.(*host.Error); he.Field != tt.field {
				t.Fatalf("field %q, want %q", he.Field, tt.field)
			}
		})
	}
}

func TestMemoryTTL(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "cache"}
	f.Put(ctx, sc, "short", json.RawMessage(`1`), host.PutOptions{TTL: time.Minute})
	f.Put(ctx, sc, "long", json.RawMessage(`2`), host.PutOptions{TTL: time.Hour})
	f.Put(ctx, sc, "forever", json.RawMessage(`3`), host.PutOptions{})
	e, err := f.Get(ctx, sc, "short")
	if err != nil || e.ExpiresAt == nil || !e.ExpiresAt.Equal(f.clock.Now().Add(time.Minute)) {
		t.Fatalf("%+v %v", e, err)
	}
	f.clock.Add(time.Minute) // expiry is exclusive: at expires_at the entry is gone
	tests := []struct {
		key   string
		found bool
	}{{"short", false}, {"long", true}, {"forever", true}}
	for _, tt := range tests {
		_, err := f.Get(ctx, sc, tt.key)
		if (err == nil) != tt.found {
			t.Errorf("get %s after 1m: %v", tt.key, err)
		}
	}
	if keys, _ := f.List(ctx, sc, ""); !reflect.DeepEqual(keys, []string{"forever", "long"}) {
		t.Fatalf("list after expiry: %v", keys)
	}
	// An expired entry deletes like a missing one.
	wantErr(t, f.Delete(ctx, sc, "short"), host.ErrNotFound)
	// Re-putting an expired key makes it live again, without the old TTL.
	f.clock.Add(2 * time.Hour)
	if err := f.Put(ctx, sc, "long", json.RawMessage(`5`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, err := f.Get(ctx, sc, "long"); err != nil || e.ExpiresAt != nil {
		t.Fatalf("re-put: %+v %v", e, err)
	}
	f.Put(ctx, sc, "gone", json.RawMessage(`1`), host.PutOptions{TTL: time.Second})
	f.clock.Add(time.Second)
	n, err := f.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	var used int64
	f.db.QueryRow(`SELECT bytes FROM memory_usage WHERE tenant = 'acme' AND namespace = 'cache'`).Scan(&used)
	if want := int64(len("long5") + len("forever3")); used != want {
		t.Fatalf("usage %d after sweep, want %d", used, want)
	}
}

func TestMemoryTenantIsolation(t *testing.T) {
	f := newFixture(t, Options{})
	alice := host.Scope{Tenant: "alice", Namespace: "shared"}
	bob := host.Scope{Tenant: "bob", Namespace: "shared"}
	// Tenants whose names could collide if scopes were concatenated.
	tricky := []host.Scope{{Tenant: "alice/shared", Namespace: "x"}, {Tenant: "alic", Namespace: "eshared"}, {Tenant: "alice%", Namespace: "shared"}}
	for _, k := range []string{"secret-plan", "secret-plan-2", "public"} {
		if err := f.Put(ctx, alice, k, json.RawMessage(`"alice-value-`+k+`"`), host.PutOptions{Secret: true}); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh store where nobody has any key: the baseline for "a miss".
	empty := newFixture(t, Options{})

	for _, other := range append([]host.Scope{bob}, tricky...) {
		t.Run(other.Tenant+"|"+other.Namespace, func(t *testing.T) {
			for _, key := range []string{"secret-plan", "public"} {
				_, err := f.Get(ctx, other, key)
				wantErr(t, err, host.ErrNotFound)
				_, miss := empty.Get(ctx, other, key)
				if err.Error() != miss.Error() {
					t.Fatalf("get of another tenant's key %q differs from a miss: %q vs %q", key, err, miss)
				}
				if strings.Contains(err.Error(), "alice") {
					t.Fatalf("error names the other tenant: %v", err)
				}
				derr := f.Delete(ctx, other, key)
				dmiss := empty.Delete(ctx, other, key)
				if !strings.Contains(derr.Error(), "not found") || derr.Error() != dmiss.Error() {
					t.Fatalf("delete: %v vs %v", derr, dmiss)
				}
			}
			for _, prefix := range []string{"", "s", "secret", "%", "_", "secret-plan"} {
				keys, err := f.List(ctx, other, prefix)
				if err != nil || len(keys) != 0 {
					t.Fatalf("list %q as %s: %v %v", prefix, other.Tenant, keys, err)
				}
			}
			// The other tenant can use the same key names independently.
			if err := f.Put(ctx, other, "secret-plan", json.RawMessage(`"mine"`), host.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			if e, _ := f.Get(ctx, other, "secret-plan"); string(e.Value) != `"mine"` {
				t.Fatalf("got %s", e.Value)
			}
			f.Delete(ctx, other, "secret-plan")
		})
	}
	// Alice's data is intact, and her prefix listing is exact.
	if keys, _ := f.List(ctx, alice, "secret"); !reflect.DeepEqual(keys, []string{"secret-plan", "secret-plan-2"}) {
		t.Fatalf("alice's list: %v", keys)
	}
	if e, err := f.Get(ctx, alice, "secret-plan"); err != nil || string(e.Value) != `"alice-value-secret-plan"` {
		t.Fatalf("alice's value: %v", err)
	}
	// Namespace quotas are per tenant: bob filling his namespace does not
	// touch alice's usage, and his error does not reveal hers.
	small := newFixture(t, Options{MaxNamespaceBytes: 100})
	small.Put(ctx, alice, "a", json.RawMessage(`"`+strings.Repeat("x", 80)+`"`), host.PutOptions{})
	if err := small.Put(ctx, bob, "a", json.RawMessage(`"`+strings.Repeat("y", 80)+`"`), host.PutOptions{}); err != nil {
		t.Fatalf("bob limited by alice's usage: %v", err)
	}
}

func TestMemoryLimits(t *testing.T) {
	f := newFixture(t, Options{MaxValueBytes: 64, MaxNamespaceBytes: 200})
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	val := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("v", n-2) + `"`) }
	tests := []struct {
		name string
		key  string
		v    json.RawMessage
		ttl  time.Duration
		kind error
	}{
		{"value at the limit", "a", val(64), 0, nil},
		{"value over the limit", "b", val(65), 0, host.ErrTooLarge},
		{"fills the namespace", "b", val(60), 0, nil},                   // 65+61 = 126
		{"second fill", "c", val(60), time.Minute, nil},                 // +61 = 187
		{"namespace over the limit", "d", val(20), 0, host.ErrTooLarge}, // +21 = 208
		{"replacing a key counts the difference", "a", val(10), 0, nil}, // 187-65+11 = 133
		{"now fits", "d", val(20), 0, nil},                              // 154
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.Put(ctx, sc, tt.key, tt.v, host.PutOptions{TTL: tt.ttl})
			if tt.kind == nil && err != nil || tt.kind != nil && !errorsIs(err, tt.kind) {
				t.Fatalf("err %v, want %v", err, tt.kind)
			}
			if tt.kind == host.ErrTooLarge && host.ABIStatus(err) != 20 {
				t.Fatalf("status %d", host.ABIStatus(err))
			}
		})
	}
	// Expired entries stop counting when the limit is reached.
	wantErr(t, f.Put(ctx, sc, "e", val(60), host.PutOptions{}), host.ErrTooLarge) // 154+61 = 215
	f.clock.Add(time.Minute)                                                      // "c" expires: 154-61 = 93
	if err := f.Put(ctx, sc, "e", val(60), host.PutOptions{}); err != nil {
		t.Fatalf("expired entry still counted: %v", err)
	}
	var used int64
	f.db.QueryRow(`SELECT bytes FROM memory_usage`).Scan(&used)
	var actual int64
	f.db.QueryRow(`SELECT SUM(size) FROM memory_entries`).Scan(&actual)
	if used != actual || used != 154 {
		t.Fatalf("usage %d, entries %d, want 154", used, actual)
	}
	// The limit error names the caller's own namespace and key only.
	err := f.Put(ctx, sc, "z", val(64), host.PutOptions{})
	if err == nil || err.Error() != "memory put n/z: namespace n would hold 219 bytes; the limit is 200" {
		t.Fatalf("message: %v", err)
	}
}

func TestRedactSecretsReadFromMemory(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	f.Put(ctx, sc, "api-token", json.RawMessage(`"sk-live-123456"`), host.PutOptions{Secret: true})
	f.Put(ctx, sc, "public", json.RawMessage(`"hello world"`), host.PutOptions{})
	r := evidence.NewRedactor()
	for _, k := range []string{"api-token", "public"} {
		e, _ := f.Get(ctx, sc, k)
		if e.Secret {
			r.Add(sc.Namespace+"/"+e.Key, e.Value)
		}
	}
	a := &host.Attempt{Output: json.RawMessage(`{"echo":"token=sk-live-123456","greeting":"hello world"}`), Stdout: []byte("using sk-live-123456\n"), Outcome: "completed"}
	r.Attempt(a)
	if string(a.Output) != `{"echo":"token=[REDACTED:creds/api-token]","greeting":"hello world"}` || string(a.Stdout) != "using [REDACTED:creds/api-token]\n" {
		t.Fatalf("%s %q", a.Output, a.Stdout)
	}
	if err := f.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := f.db.QueryRow(`SELECT record FROM attempt_records`).Scan(&out); err != nil || len(out) == 0 {
		t.Fatalf("no record stored: %v", err)
	}
	if strings.Contains(string(out), "sk-live") {
		t.Fatal("secret reached evidence")
	}
}

// The read cache never serves a value another process has replaced or
// deleted: two Stores on one database stand for two processes (each maps
// the memory generation on its own, as separate processes do).
func TestMemoryCacheCoherentAcrossStores(t *testing.T) {
	a := newFixture(t, Options{})
	b := a.another(t)
	sc := host.Scope{Tenant: "t1", Namespace: "ns"}
	get := func(s *Store, sc host.Scope, key string) string {
		t.Helper()
		e, err := s.Get(ctx, sc, key)
		if errors.Is(err, host.ErrNotFound) {
			return "<absent>"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(e.Value)
	}
	put := func(s *Store, sc host.Scope, key, v string, opts host.PutOptions) {
		t.Helper()
		if err := s.Put(ctx, sc, key, json.RawMessage(v), opts); err != nil {
			t.Fatal(err)
		}
	}

	// Absence is cached, and a write elsewhere ends it.
	if got := get(a.Store, sc, "k"); got != "<absent>" {
		t.Fatal(got)
	}
	put(b, sc, "k", `1`, host.PutOptions{})
	for i, want := range []string{`1`, `1`} { // the second read is served from the cache
		if got := get(a.Store, sc, "k"); got != want {
			t.Fatalf("read %d: %s, want %s", i, got, want)
		}
	}
	put(b, sc, "k", `2`, host.PutOptions{})
	if got := get(a.Store, sc, "k"); got != `2` {
		t.Fatalf("after another store's put: %s", got)
	}
	if err := b.Delete(ctx, sc, "k"); err != nil {
		t.Fatal(err)
	}
	if got := get(a.Store, sc, "k"); got != "<absent>" {
		t.Fatalf("after another store's delete: %s", got)
	}
	// A cached entry expires on time.
	put(a.Store, sc, "ttl", `"soon"`, host.PutOptions{TTL: time.Minute})
	if got := get(a.Store, sc, "ttl"); got != `"soon"` {
		t.Fatal(got)
	}
	a.clock.Add(time.Minute)
	if got := get(a.Store, sc, "ttl"); got != "<absent>" {
		t.Fatalf("expired entry served from the cache: %s", got)
	}
	// The cache is keyed by tenant like the table: a read by one tenant
	// answers nothing for another.
	put(a.Store, sc, "mine", `"t1"`, host.PutOptions{})
	get(a.Store, sc, "mine")
	if got := get(a.Store, host.Scope{Tenant: "t2", Namespace: "ns"}, "mine"); got != "<absent>" {
		t.Fatalf("tenant t2 read t1's entry: %s", got)
	}
	// A write behind every store's back (the sqlite3 shell) is seen once
	// the cached value is older than the cache's maximum age.
	a.mc.maxAge = 20 * time.Millisecond
	get(a.Store, sc, "mine")
	if _, err := b.db.Exec(`UPDATE memory_entries SET value = '"edited"' WHERE key = 'mine'`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	if got := get(a.Store, sc, "mine"); got != `"edited"` {
		t.Fatalf("after maxAge: %s", got)
	}
}

// Reads racing writes from another store never end on a stale value.
func TestMemoryCacheRacingWrites(t *testing.T) {
	a := newFixture(t, Options{Now: time.Now})
	b := a.another(t)
	sc := host.Scope{Tenant: "t", Namespace: "ns"}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				a.Get(ctx, sc, "k")
			}
		}()
	}
	for i := range 200 {
		if err := b.Put(ctx, sc, "k", json.RawMessage(fmt.Sprint(i)), host.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		e, err := a.Get(ctx, sc, "k")
		if err != nil || string(e.Value) != fmt.Sprint(i) {
			t.Fatalf("after put %d: %v %s", i, err, e.Value)
		}
	}
	close(stop)
	wg.Wait()
}
