package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"testing"
)

func TestVerifyEd25519(t *testing.T) {
	const name = "community.alice.tools"
	tarball := []byte("openwop pack tarball bytes")
	regPub, regPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, strangerPriv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)

	der, err := x509.MarshalPKIXPublicKey(otherPub)
	if err != nil {
		t.Fatal(err)
	}
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})

	p := NewPolicy()
	if err := p.AddRegistryKey("openwop", []byte(base64.StdEncoding.EncodeToString(regPub)+"\n"), []string{"community.*"}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddRegistryKey("other-registry", otherPEM, []string{"vendor.other.*"}); err != nil {
		t.Fatal(err)
	}

	sig := ed25519.Sign(regPriv, tarball)
	b64 := []byte(base64.StdEncoding.EncodeToString(sig) + "\n")
	rawB64 := []byte(base64.RawStdEncoding.EncodeToString(sig))
	tampered := bytes.Clone(tarball)
	tampered[0] ^= 1
	badSig := bytes.Clone(sig)
	badSig[10] ^= 1

	tests := []struct {
		name      string
		tarball   []byte
		sig       []byte
		pack      string
		policy    *Policy
		wantCheck string
		signer    string
	}{
		{"raw signature", tarball, sig, name, p, "", "registry-key:openwop"},
		{"base64 signature with newline", tarball, b64, name, p, "", "registry-key:openwop"},
		{"unpadded base64 signature", tarball, rawB64, name, p, "", "registry-key:openwop"},
		{"PEM registry key", tarball, ed25519.Sign(otherPriv, tarball), "vendor.other.x", p, "", "registry-key:other-registry"},
		{"bad signature", tarball, badSig, name, p, CheckSignature, ""},
		{"tampered tarball", tampered, sig, name, p, CheckSignature, ""},
		{"untrusted key", tarball, ed25519.Sign(strangerPriv, tarball), name, p, CheckSignature, ""},
		{"trusted key outside its namespace", tarball, ed25519.Sign(otherPriv, tarball), name, p, CheckNamespace, ""},
		{"no registry keys", tarball, sig, name, NewPolicy(), CheckSignature, ""},
		{"no signature", tarball, nil, name, p, CheckUnsigned, ""},
		{"malformed signature", tarball, []byte("not a signature"), name, p, CheckBundle, ""},
		{"oversized signature", tarball, make([]byte, MaxEd25519SignatureSize+1), name, p, CheckBundle, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := VerifyEd25519(tt.tarball, tt.sig, tt.pack, tt.policy)
			if tt.sig != nil {
				// Verify of a Signed with a Signature judges the same.
				v2, err2 := Verify(context.Background(), tt.policy, Signed{Archive: tt.tarball, Signature: tt.sig}, tt.pack, VerifyOptions{})
				if (err == nil) != (err2 == nil) || (v != nil && *v != *v2) {
					t.Errorf("Verify: %+v, %v; VerifyEd25519: %+v, %v", v2, err2, v, err)
				}
			}
			if tt.wantCheck != "" {
				checkRefusal(t, err, tt.wantCheck)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Signer != tt.signer || v.KeyID == "" {
				t.Errorf("verdict %+v, want signer %q", v, tt.signer)
			}
		})
	}

	t.Run("registry key must be Ed25519", func(t *testing.T) {
		if err := NewPolicy().AddRegistryKey("ec", newTestKey(t).pubPEM, []string{"local.*"}); err == nil {
			t.Error("AddRegistryKey accepted an ECDSA key")
		}
		if err := NewPolicy().AddRegistryKey("short", []byte(base64.StdEncoding.EncodeToString(regPub[:31])), []string{"local.*"}); err == nil {
			t.Error("AddRegistryKey accepted a 31-byte key")
		}
	})
}
