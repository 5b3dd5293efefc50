package postgres

import (
	"bytes"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// openNodes opens n stores on one fresh database with opts (on clk when
// it is not nil), as n packrun nodes would.
func openNodes(t testing.TB, n int, clk *clock, opts Options) []*Store {
	t.Helper()
	dsn := pgtest.DSN(t)
	if clk != nil {
		opts.Now = clk.Now
	}
	out := make([]*Store, n)
	for i := range out {
		s, err := Open(ctx, dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

func mustPut(t testing.TB, s *Store, sc host.Scope, key, value string, opts host.PutOptions) {
	t.Helper()
	if err := s.Put(ctx, sc, key, json.RawMessage(value), opts); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// usageOf reads a namespace's recorded usage and the sum of its entries'
// sizes.
func usageOf(t testing.TB, s *Store, sc host.Scope) (recorded, actual int64) {
	t.Helper()
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT bytes FROM memory_usage WHERE tenant = $1 AND namespace = $2), 0),
		(SELECT coalesce(sum(size), 0) FROM memory_entries WHERE tenant = $1 AND namespace = $2)`, sc.Tenant, sc.Namespace).Scan(&recorded, &actual)
	if err != nil {
		t.Fatal(err)
	}
	return recorded, actual
}

// An entry put on one node with a TTL is read on another until its
// expiry, on the shared clock, and is gone from both at it; a sweep on a
// third deletes it and gives its bytes back.
func TestMemoryTTLAcrossNodes(t *testing.T) {
	clk := newClock()
	ns := openNodes(t, 3, clk, Options{})
	a, b, c := ns[0], ns[1], ns[2]
	sc := host.Scope{Tenant: "acme", Namespace: "cache"}
	mustPut(t, a, sc, "short", `"s"`, host.PutOptions{TTL: time.Minute})
	mustPut(t, a, sc, "long", `"l"`, host.PutOptions{TTL: time.Hour})
	e, err := b.Get(ctx, sc, "short")
	if err != nil || string(e.Value) != `"s"` || e.ExpiresAt == nil || !e.ExpiresAt.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("node b reads %+v %v", e, err)
	}
	clk.Add(time.Minute)
	for _, s := range ns {
		if _, err := s.Get(ctx, sc, "short"); !errorsIs(err, host.ErrNotFound) {
			t.Fatalf("an expired entry read: %v", err)
		}
		if keys, err := s.List(ctx, sc, ""); err != nil || len(keys) != 1 || keys[0] != "long" {
			t.Fatalf("list after expiry: %v %v", keys, err)
		}
	}
	n, err := c.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if rec, act := usageOf(t, c, sc); rec != act || act != int64(len("long")+len(`"l"`)) {
		t.Fatalf("usage %d, entries %d", rec, act)
	}
	// A delete on one node is seen by the others.
	if err := b.Delete(ctx, sc, "long"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Get(ctx, sc, "long"); !errorsIs(err, host.ErrNotFound) {
		t.Fatalf("read after a delete on another node: %v", err)
	}
}

// Nodes writing one namespace at once keep its usage exact and never
// take it past the limit: every write locks the namespace's usage row
// first.
func TestMemoryUsageAcrossNodes(t *testing.T) {
	const limit = 2500
	ns := openNodes(t, 3, nil, Options{MaxNamespaceBytes: limit})
	sc := host.Scope{Tenant: "acme", Namespace: "shared"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	tooLarge := 0
	for i, s := range ns {
		wg.Go(func() {
			for j := range 40 {
				// Keys shared between nodes (replaced, deleted) and keys
				// of their own.
				key := fmt.Sprintf("k%d", j%7)
				if j%3 == 0 {
					key = fmt.Sprintf("own-%d-%d", i, j)
				}
				var err error
				if j%5 == 4 {
					err = s.Delete(ctx, sc, key)
				} else {
					err = s.Put(ctx, sc, key, json.RawMessage(`"`+strings.Repeat("x", 20+j*3)+`"`), host.PutOptions{})
				}
				switch {
				case errorsIs(err, host.ErrTooLarge):
					mu.Lock()
					tooLarge++
					mu.Unlock()
				case err != nil && !errorsIs(err, host.ErrNotFound):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	rec, act := usageOf(t, ns[0], sc)
	if rec != act || act > limit {
		t.Fatalf("usage recorded %d, entries hold %d (limit %d)", rec, act, limit)
	}
	if tooLarge == 0 {
		t.Fatalf("no put was refused: the test did not reach the limit (usage %d)", act)
	}
}

// A put over the namespace's limit purges its expired entries first; a
// value over the value limit is refused.
func TestMemoryLimits(t *testing.T) {
	clk := newClock()
	s := openNodes(t, 1, clk, Options{MaxNamespaceBytes: 100, MaxValueBytes: 60})[0]
	sc := host.Scope{Tenant: "acme", Namespace: "n"}
	err := s.Put(ctx, sc, "big", json.RawMessage(`"`+strings.Repeat("x", 60)+`"`), host.PutOptions{})
	wantErr(t, err, host.ErrTooLarge)
	mustPut(t, s, sc, "a", `"`+strings.Repeat("a", 50)+`"`, host.PutOptions{TTL: time.Second})
	err = s.Put(ctx, sc, "b", json.RawMessage(`"`+strings.Repeat("b", 50)+`"`), host.PutOptions{})
	wantErr(t, err, host.ErrTooLarge)
	clk.Add(time.Second)
	mustPut(t, s, sc, "b", `"`+strings.Repeat("b", 50)+`"`, host.PutOptions{})
	if rec, act := usageOf(t, s, sc); rec != act || act != 53 {
		t.Fatalf("usage %d, entries %d, want 53", rec, act)
	}
}

// Secret values are sealed at rest; a node without the key can neither
// read nor store them, one with another key cannot read them.
func TestMemorySecretsSealed(t *testing.T) {
	dsn := pgtest.DSN(t)
	open := func(key []byte) *Store {
		s, err := Open(ctx, dsn, Options{SecretKey: key})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, other, none := open(testSecretKey), open(bytes.Repeat([]byte{9}, 32)), open(nil)
	sc := host.Scope{Tenant: "acme", Namespace: "keys"}
	mustPut(t, a, sc, "token", `"hunter2"`, host.PutOptions{Secret: true})
	var raw []byte
	if err := a.pool.QueryRow(ctx, `SELECT value FROM memory_entries WHERE key = 'token'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("hunter2")) || !storecore.Sealed(raw) {
		t.Fatalf("stored in clear: %q", raw)
	}
	if e, err := a.Get(ctx, sc, "token"); err != nil || string(e.Value) != `"hunter2"` || !e.Secret {
		t.Fatalf("%+v %v", e, err)
	}
	_, err := other.Get(ctx, sc, "token")
	wantErr(t, err, storecore.ErrSecretKey)
	_, err = none.Get(ctx, sc, "token")
	wantErr(t, err, storecore.ErrSecretKey)
	wantErr(t, none.Put(ctx, sc, "t2", json.RawMessage(`1`), host.PutOptions{Secret: true}), storecore.ErrSecretKey)
	// A sealed value copied to another entry fails authentication.
	if _, err := a.pool.Exec(ctx, `INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, updated_at)
		SELECT tenant, namespace, 'copy', value, secret, size, updated_at FROM memory_entries WHERE key = 'token'`); err != nil {
		t.Fatal(err)
	}
	_, err = a.Get(ctx, sc, "copy")
	wantErr(t, err, storecore.ErrSecretAltered)
	if _, err := Open(ctx, dsn, Options{SecretKey: []byte("short")}); err == nil {
		t.Fatal("a key of the wrong length was taken")
	}
}

// A secret value sealed by internal/store/sqlite opens here under the same key:
// the format is one, so a sealed value moves between backends as it is.
func TestMemorySealCompatibleWithSQLite(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "secret.key")
	if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(testSecretKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "packrun.db")
	lite, err := sqlite.Open(ctx, path, sqlite.Options{SecretKeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	sc := host.Scope{Tenant: "acme", Namespace: "keys"}
	if err := lite.Put(ctx, sc, "token", json.RawMessage(`"hunter2"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	lite.Close()
	d, err := sql.Open("sqlite3", path) // the driver internal/store/sqlite registers
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var raw []byte
	if err := d.QueryRowContext(ctx, `SELECT value FROM memory_entries WHERE key = 'token'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	k, _ := storecore.NewSecretKey(testSecretKey)
	if pt, err := k.Open(sc, "token", raw); err != nil || string(pt) != `"hunter2"` {
		t.Fatalf("opened %q %v", pt, err)
	}
}
