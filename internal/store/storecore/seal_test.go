package storecore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/packrun/packrun/host"
)

// A sealed value opens under its key and entry only: another key, another
// entry, an altered or cut value, or an unknown format version are
// refused with the right error.
func TestSealOpen(t *testing.T) {
	k, err := NewSecretKey(bytes.Repeat([]byte{1}, SecretKeyLen))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSecretKey(bytes.Repeat([]byte{2}, SecretKeyLen))
	sc := host.Scope{Tenant: "acme", Namespace: "keys"}
	v := k.Seal(sc, "token", []byte(`"hunter2"`))
	if !Sealed(v) || bytes.Contains(v, []byte("hunter2")) || Sealed([]byte(`"x"`)) {
		t.Fatalf("sealed form %q", v)
	}
	if pt, err := k.Open(sc, "token", v); err != nil || string(pt) != `"hunter2"` {
		t.Fatalf("%q %v", pt, err)
	}
	if w := k.Seal(sc, "token", []byte(`"hunter2"`)); bytes.Equal(v, w) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	altered := bytes.Clone(v)
	altered[len(altered)-1] ^= 1
	future := bytes.Clone(v)
	future[1] = 9
	for name, tt := range map[string]struct {
		key   *SecretKey
		sc    host.Scope
		entry string
		v     []byte
		want  error
	}{
		"another key":       {other, sc, "token", v, ErrSecretKey},
		"another entry":     {k, sc, "token2", v, ErrSecretAltered},
		"another tenant":    {k, host.Scope{Tenant: "bob", Namespace: "keys"}, "token", v, ErrSecretAltered},
		"altered":           {k, sc, "token", altered, ErrSecretAltered},
		"cut short":         {k, sc, "token", v[:sealHeaderLen+nonceLen], ErrSecretAltered},
		"no version":        {k, sc, "token", v[:1], ErrSecretAltered},
		"a newer version":   {k, sc, "token", future, nil},
		"unknown version 0": {k, sc, "token", append([]byte{0, 0}, v[2:]...), ErrSecretAltered},
	} {
		_, err := tt.key.Open(tt.sc, tt.entry, tt.v)
		if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
			t.Fatalf("%s: %v, want %v", name, err, tt.want)
		}
	}
	if _, err := NewSecretKey([]byte("short")); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("a short key: %v", err)
	}
}

// Open reads stored bytes: whatever they are, it answers an error or the
// plaintext, never panics, and opens only what Seal made for the entry.
func FuzzOpen(f *testing.F) {
	k, _ := NewSecretKey(bytes.Repeat([]byte{1}, SecretKeyLen))
	sc := host.Scope{Tenant: "acme", Namespace: "keys"}
	f.Add(k.Seal(sc, "token", []byte(`"v"`)))
	f.Add([]byte{0, 1})
	f.Add([]byte{0, 2, 1, 2, 3, 4})
	f.Add([]byte(`"plain"`))
	f.Fuzz(func(t *testing.T, v []byte) {
		pt, err := k.Open(sc, "token", v)
		if err == nil && !bytes.Equal(pt, []byte(`"v"`)) {
			t.Fatalf("opened %q from %x", pt, v)
		}
	})
}
