package registry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerateKey(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "signing")
	if err := GenerateKey(prefix); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{prefix + ".key": 0o600, prefix + ".pub": 0o644} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm()&^mode != 0 {
			t.Errorf("%s mode %v, want at most %v", path, st.Mode().Perm(), mode)
		}
	}
	keyPEM, _ := os.ReadFile(prefix + ".key")
	if b, _ := pem.Decode(keyPEM); b == nil || b.Type != "PRIVATE KEY" {
		t.Errorf("private key PEM: %q", keyPEM)
	}
	pubPEM, _ := os.ReadFile(prefix + ".pub")
	if b, _ := pem.Decode(pubPEM); b == nil || b.Type != "PUBLIC KEY" {
		t.Errorf("public key PEM: %q", pubPEM)
	}

	priv, err := LoadPrivateKey(prefix + ".key")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := LoadPublicKey(prefix + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if !priv.Public().(*ecdsa.PublicKey).Equal(pub) {
		t.Error("loaded public key does not match the private key")
	}

	// Refuses to overwrite either file, and leaves both untouched.
	if err := GenerateKey(prefix); !errors.Is(err, ErrExists) {
		t.Errorf("GenerateKey over existing files = %v, want ErrExists", err)
	}
	other := filepath.Join(dir, "half")
	if err := os.WriteFile(other+".pub", []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := GenerateKey(other); !errors.Is(err, ErrExists) {
		t.Errorf("GenerateKey with existing .pub = %v, want ErrExists", err)
	}
	if _, err := os.Stat(other + ".key"); !errors.Is(err, os.ErrNotExist) {
		t.Error("GenerateKey wrote a .key next to an existing .pub")
	}
	if again, _ := os.ReadFile(prefix + ".key"); string(again) != string(keyPEM) {
		t.Error("private key was overwritten")
	}

	// A generated key signs packs that verify.
	p := NewPolicy()
	if err := p.AddKey("me", pubPEM, []string{"local.*"}); err != nil {
		t.Fatal(err)
	}
	sig, prov, err := Sign(context.Background(), []byte("pack"), "local.demo", priv, testSignOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), p, Signed{Archive: []byte("pack"), Bundle: sig, Provenance: prov}, "local.demo", VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadKeyErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	p384DER, _ := x509.MarshalPKCS8PrivateKey(p384)
	k := newTestKey(t)
	sec1, _ := x509.MarshalECPrivateKey(k.priv)

	tests := []struct {
		name    string
		path    string
		public  bool
		wantErr string // substring; "" = ok
	}{
		{"missing private key", filepath.Join(dir, "nope.key"), false, "no such file"},
		{"missing public key", filepath.Join(dir, "nope.pub"), true, "no such file"},
		{"not PEM", write("junk.key", []byte("junk")), false, "no PEM block"},
		{"public key as private", write("pub-as.key", k.pubPEM), false, `"PUBLIC KEY"`},
		{"private key as public", write("priv-as.pub", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p384DER})), true, `"PRIVATE KEY"`},
		{"cosign encrypted key", write("cosign.key", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED SIGSTORE PRIVATE KEY", Bytes: []byte("x")})), false, "encrypted"},
		{"P-384 key cannot sign", write("p384.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p384DER})), false, "P-256"},
		{"SEC 1 key", write("sec1.key", pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})), false, ""},
		{"too large", write("huge.pub", make([]byte, MaxKeyFileSize+1)), true, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.public {
				_, err = LoadPublicKey(tt.path)
			} else {
				_, err = LoadPrivateKey(tt.path)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to mention %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.path) && !strings.Contains(err.Error(), filepath.Base(tt.path)) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
	if _, _, err := Sign(context.Background(), []byte("x"), "local.x", p384, testSignOptions()); err == nil {
		t.Error("Sign accepted a P-384 key")
	}
}
