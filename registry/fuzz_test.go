package registry

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// FuzzVerify feeds arbitrary bytes to the bundle parsing path, as the
// signature bundle and as the provenance bundle. Verify must never panic,
// and every failure must be a refusal (ErrUntrusted) that reads as one
// short line.
func FuzzVerify(f *testing.F) {
	k := newTestKey(f)
	const name = "vendor.acme.fuzz"
	archive := []byte("fuzz archive")
	sig, prov := signPack(f, k, archive, name)
	p := NewPolicy()
	if err := p.AddKey("k", k.pubPEM, []string{"vendor.acme.*"}); err != nil {
		f.Fatal(err)
	}
	ks := newKeylessSigstore(f, false)
	p.TrustedRoot = &TrustedRootRef{JSON: ks.rootJSON}
	if err := p.AddIdentity(TrustedIdentity{Name: "i", Issuer: "https://issuer", Subject: "a@b", Namespaces: []string{"vendor.acme.*"}}); err != nil {
		f.Fatal(err)
	}
	keyless := ks.sign(f, "a@b", "https://issuer", archive)

	f.Add(sig, prov)
	f.Add(prov, sig)
	f.Add(keyless, prov)
	f.Add([]byte(`{}`), []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`))
	f.Add([]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{}},"messageSignature":{}}`),
		[]byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{}},"dsseEnvelope":{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[{}]}}`))
	f.Add([]byte("null"), []byte{})

	ctx := context.Background()
	check := func(t *testing.T, err error) {
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUntrusted) {
			t.Fatalf("error is not a refusal: %v", err)
		}
		if msg := err.Error(); len(msg) >= 4<<10 || strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("refusal is not one short line (%d bytes): %.300q", len(msg), msg)
		}
	}
	f.Fuzz(func(t *testing.T, sigBytes, provBytes []byte) {
		_, err := Verify(ctx, p, Signed{Archive: archive, Bundle: sigBytes, Provenance: provBytes}, name, VerifyOptions{})
		check(t, err)
		_, err = Verify(ctx, p, Signed{Archive: archive, Bundle: sig, Provenance: provBytes}, name, VerifyOptions{})
		check(t, err)
	})
}
