package sqlite

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

const plainSecret = `"sk-live-8c1f2e0b-plaintext"`

// onDisk is every byte the store's database holds on disk: the database
// file, its WAL and its shared-memory index.
func onDisk(t *testing.T, dbPath string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

func mustGet(t *testing.T, s *Store, sc host.Scope, key string) *host.Entry {
	t.Helper()
	e, err := s.Get(ctx, sc, key)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func rawValue(t *testing.T, s *Store, sc host.Scope, key string) []byte {
	t.Helper()
	var v []byte
	if err := s.db.QueryRow(`SELECT value FROM memory_entries WHERE tenant = ? AND namespace = ? AND key = ?`, sc.Tenant, sc.Namespace, key).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A secret value is on disk sealed only, in the database and its WAL,
// while Get (of this store, from its cache, and of another) returns it;
// a plain value stays plaintext. No key file exists before the first
// secret.
func TestMemorySecretSealedAtRest(t *testing.T) {
	f := newFixture(t, Options{})
	keyFile := filepath.Join(filepath.Dir(f.path), "secret.key")
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	if err := f.Put(ctx, sc, "public", json.RawMessage(`"plain-visible-value"`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file before any secret: %v", err)
	}
	if err := f.Put(ctx, sc, "api-token", json.RawMessage(plainSecret), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second read is served from the cache
		if e := mustGet(t, f.Store, sc, "api-token"); string(e.Value) != plainSecret || !e.Secret {
			t.Fatalf("read %d: %s secret=%v", i, e.Value, e.Secret)
		}
	}
	// Before another Open, which would seal a plaintext secret.
	disk := onDisk(t, f.path)
	if !bytes.Contains(disk, []byte("plain-visible-value")) {
		t.Fatal("the plain value is not on disk: the check below would prove nothing")
	}
	if bytes.Contains(disk, []byte("sk-live-8c1f2e0b")) {
		t.Fatal("the secret is on disk in plaintext")
	}
	if e := mustGet(t, f.another(t), sc, "api-token"); string(e.Value) != plainSecret || !e.Secret {
		t.Fatalf("read by another store: %s secret=%v", e.Value, e.Secret)
	}
	if v := rawValue(t, f.Store, sc, "api-token"); !sealed(v) || storecore.CheckSealFormat(v) != nil {
		t.Fatalf("stored form %x", v[:2])
	}
	// Usage counts the caller's bytes, not the sealed form's.
	var used int64
	f.db.QueryRow(`SELECT bytes FROM memory_usage`).Scan(&used)
	if want := int64(len("public") + len(`"plain-visible-value"`) + len("api-token") + len(plainSecret)); used != want {
		t.Fatalf("usage %d, want %d", used, want)
	}
}

// A sealed value moved to another entry — another key, namespace or
// tenant — or altered fails authentication; it is never handed out.
func TestMemorySecretMovedFailsAuthentication(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	if err := f.Put(ctx, sc, "a", json.RawMessage(plainSecret), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	sealedA := rawValue(t, f.Store, sc, "a")
	altered := bytes.Clone(sealedA)
	altered[len(altered)-1] ^= 1
	tests := []struct {
		name  string
		sc    host.Scope
		key   string
		value []byte
	}{
		{"another key", sc, "b", sealedA},
		{"another namespace", host.Scope{Tenant: "acme", Namespace: "other"}, "a", sealedA},
		{"another tenant", host.Scope{Tenant: "evil", Namespace: "creds"}, "a", sealedA},
		{"altered", sc, "a", altered},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.db.Exec(`INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, updated_at) VALUES (?, ?, ?, ?, 1, 1, '')
				ON CONFLICT (tenant, namespace, key) DO UPDATE SET value = excluded.value`, tt.sc.Tenant, tt.sc.Namespace, tt.key, tt.value); err != nil {
				t.Fatal(err)
			}
			_, err := f.another(t).Get(ctx, tt.sc, tt.key)
			if !errors.Is(err, ErrSecretAltered) || !strings.Contains(err.Error(), "altered, or copied from another entry") {
				t.Fatalf("error %v", err)
			}
		})
	}
}

// A wrong, missing or malformed key file is an error that names the file
// and what to do, never garbage; plain values still read. A missing file
// is not replaced by a new key while values sealed with the old one exist.
func TestMemorySecretKeyFileErrors(t *testing.T) {
	f := newFixture(t, Options{})
	dir := filepath.Dir(f.path)
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	f.Put(ctx, sc, "public", json.RawMessage(`1`), host.PutOptions{})
	if err := f.Put(ctx, sc, "token", json.RawMessage(plainSecret), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	otherKey := filepath.Join(t.TempDir(), "other.key")
	if err := os.WriteFile(otherKey, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badKey := filepath.Join(t.TempDir(), "bad.key")
	os.WriteFile(badKey, []byte("not a key\n"), 0o600)
	missing := filepath.Join(t.TempDir(), "missing.key")

	tests := []struct {
		name    string
		keyFile string
		want    []string
	}{
		{"another key", otherKey, []string{otherKey, "holds key", "was sealed with key", "PACKRUN_SECRET_KEY_FILE"}},
		{"missing", missing, []string{missing, "does not exist", "restore it from your backup", "PACKRUN_SECRET_KEY_FILE"}},
		{"malformed", badKey, []string{badKey, "is not a packrun secret key", "64 hex digits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, f.path, Options{SecretKeyFile: tt.keyFile})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			e, err := s.Get(ctx, sc, "token")
			if !errors.Is(err, ErrSecretKey) || e != nil {
				t.Fatalf("got %v, %v", e, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sk-live") {
				t.Fatalf("error shows the secret: %v", err)
			}
			if e, err := s.Get(ctx, sc, "public"); err != nil || string(e.Value) != "1" {
				t.Fatalf("plain value: %v", err)
			}
		})
	}

	// The default key file lost: no new key is made over the sealed values.
	if err := os.Rename(filepath.Join(dir, "secret.key"), filepath.Join(dir, "secret.key.bak")); err != nil {
		t.Fatal(err)
	}
	s := f.another(t)
	err := s.Put(ctx, sc, "new", json.RawMessage(`"x"`), host.PutOptions{Secret: true})
	if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "1 secret value(s) in this store are sealed with key") {
		t.Fatalf("put with the key file lost: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a new key file was made: %v", err)
	}
	// Restoring the file mends the same store, without a restart.
	os.Rename(filepath.Join(dir, "secret.key.bak"), filepath.Join(dir, "secret.key"))
	if e := mustGet(t, s, sc, "token"); string(e.Value) != plainSecret {
		t.Fatalf("after restoring the key file: %s", e.Value)
	}
}

// A secret an older packrun stored in plaintext reads as it is, and the
// next Open seals it in place: afterwards it is on disk sealed only.
func TestMemorySecretLegacyPlaintextSealedOnOpen(t *testing.T) {
	f := newFixture(t, Options{})
	keyFile := filepath.Join(filepath.Dir(f.path), "secret.key")
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	legacy := func(key string) {
		t.Helper()
		if _, err := f.db.Exec(`INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, updated_at) VALUES (?, ?, ?, ?, 1, ?, ?)`,
			sc.Tenant, sc.Namespace, key, []byte(plainSecret), len(key)+len(plainSecret), ts(f.now())); err != nil {
			t.Fatal(err)
		}
	}
	legacy("old-1")
	legacy("old-2")
	if e := mustGet(t, f.Store, sc, "old-1"); string(e.Value) != plainSecret || !e.Secret {
		t.Fatalf("legacy read: %s %v", e.Value, e.Secret)
	}
	if !bytes.Contains(onDisk(t, f.path), []byte("sk-live-8c1f2e0b")) {
		t.Fatal("the legacy plaintext is not on disk: the check below would prove nothing")
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("key file before any sealing: %v", err)
	}
	f.Close()

	s, err := Open(ctx, f.path, Options{Now: f.opts.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"old-1", "old-2"} {
		if v := rawValue(t, s, sc, k); !sealed(v) {
			t.Fatalf("%s not sealed on open", k)
		}
		if e := mustGet(t, s, sc, k); string(e.Value) != plainSecret || !e.Secret {
			t.Fatalf("%s after sealing: %s %v", k, e.Value, e.Secret)
		}
	}
	if bytes.Contains(onDisk(t, f.path), []byte("sk-live-8c1f2e0b")) {
		t.Fatal("the legacy plaintext is still on disk after sealing")
	}
}

// A sealed value is a secret whatever its flag says: clearing the flag in
// the database does not take it out of redaction.
func TestMemorySecretSealedIsSecret(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	f.Put(ctx, sc, "token", json.RawMessage(plainSecret), host.PutOptions{Secret: true})
	f.db.Exec(`UPDATE memory_entries SET secret = 0`)
	if e := mustGet(t, f.another(t), sc, "token"); string(e.Value) != plainSecret || !e.Secret {
		t.Fatalf("%s secret=%v", e.Value, e.Secret)
	}
}

// One sealing format: a value this driver seals opens with the key as
// internal/store/postgres holds it (storecore.SecretKey from its raw bytes),
// and a value sealed that way opens here, so `store migrate` copies
// sealed values as they are.
func TestSealedValueCrossesDrivers(t *testing.T) {
	f := newFixture(t, Options{})
	sc := host.Scope{Tenant: "acme", Namespace: "creds"}
	if err := f.Put(ctx, sc, "sealed-here", json.RawMessage(plainSecret), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	hexKey, err := os.ReadFile(filepath.Join(filepath.Dir(f.path), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(hexKey)))
	if err != nil {
		t.Fatal(err)
	}
	pgKey, err := storecore.NewSecretKey(raw) // as postgres.Options.SecretKey
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := pgKey.Open(sc, "sealed-here", rawValue(t, f.Store, sc, "sealed-here")); err != nil || string(pt) != plainSecret {
		t.Fatalf("sealed by sqlite, opened as postgres does: %q %v", pt, err)
	}
	there := pgKey.Seal(sc, "sealed-there", []byte(plainSecret))
	if _, err := f.db.Exec(`INSERT INTO memory_entries (tenant, namespace, key, value, secret, size, updated_at)
		SELECT tenant, namespace, 'sealed-there', ?, 1, size, updated_at FROM memory_entries WHERE key = 'sealed-here'`, there); err != nil {
		t.Fatal(err)
	}
	if e := mustGet(t, f.another(t), sc, "sealed-there"); string(e.Value) != plainSecret || !e.Secret {
		t.Fatalf("sealed as postgres does, read by sqlite: %s secret=%v", e.Value, e.Secret)
	}
}
