package registry

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// The development key (packrun dev's) may be trusted for local.* only: a
// policy that names it for anything else is refused when built, loaded or
// saved, and a pack it signed outside local.* is refused by the namespace
// check like any other key's.
func TestDevKeyOnlyLocal(t *testing.T) {
	k := newTestKey(t)
	for _, ns := range [][]string{{"vendor.*"}, {"local.*", "vendor.acme.*"}, {"localx.*"}, {"local"}} {
		if err := NewPolicy().AddKey(DevKeyName, k.pubPEM, ns); err == nil || !strings.Contains(err.Error(), "trusted only for local.*") {
			t.Errorf("AddKey(%s, %v) = %v, want a refusal naming local.*", DevKeyName, ns, err)
		}
	}
	for _, ns := range [][]string{{"local.*"}, {"local.hello"}, {"local.team.*"}} {
		if err := NewPolicy().AddKey(DevKeyName, k.pubPEM, ns); err != nil {
			t.Errorf("AddKey(%s, %v) = %v", DevKeyName, ns, err)
		}
	}
	// A hand-edited trust.json cannot widen it either.
	p := NewPolicy()
	p.Keys = append(p.Keys, TrustedKey{Name: DevKeyName, PublicKey: string(k.pubPEM), Namespaces: []string{"vendor.*"}})
	path := filepath.Join(t.TempDir(), "trust.json")
	if err := p.Save(path); err == nil {
		t.Fatal("Save of a policy trusting the dev key for vendor.* succeeded")
	}
	if _, err := parsePolicy([]byte(`{"keys":[{"name":"packrun-dev","publicKey":` + jsonString(k.pubPEM) + `,"namespaces":["vendor.*"]}]}`)); err == nil {
		t.Fatal("a trust.json trusting the dev key for vendor.* loaded")
	}

	// Signed by the dev key: local.* passes, anything else is refused.
	dev := NewPolicy()
	dev.RequireProvenance = false
	if err := dev.AddKey(DevKeyName, k.pubPEM, []string{DevNamespace}); err != nil {
		t.Fatal(err)
	}
	for name, ok := range map[string]bool{"local.hello": true, "vendor.acme.hello": false} {
		arch := buildPack(t, name, "1.0.0")
		bundle, _ := signPack(t, k, arch, name)
		_, _, err := VerifyRequest(context.Background(), dev, Signed{Archive: arch, Bundle: bundle}, VerifyOptions{})
		if ok && err != nil {
			t.Errorf("%s: %v", name, err)
		}
		var ve *VerifyError
		if !ok && (!errors.As(err, &ve) || ve.Check != CheckNamespace) {
			t.Errorf("%s: err = %v, want a namespace refusal", name, err)
		}
	}
}

// A pack rebuilt after it was signed (the bundle beside it names the old
// archive) is refused with ErrChangedSinceSigned and a message that says
// so, not with the signature library's ASN.1 error.
func TestChangedSinceSigned(t *testing.T) {
	tr := newTrusted(t)
	old := buildPack(t, "vendor.acme.hello", "1.0.0")
	bundle, prov := signPack(t, tr.key, old, "vendor.acme.hello")
	rebuilt := buildPack(t, "vendor.acme.hello", "1.0.1")
	_, _, err := VerifyRequest(context.Background(), tr.policy, Signed{Archive: rebuilt, Bundle: bundle, Provenance: prov}, VerifyOptions{})
	if !errors.Is(err, ErrChangedSinceSigned) || !errors.Is(err, ErrUntrusted) {
		t.Fatalf("err = %v, want ErrChangedSinceSigned and ErrUntrusted", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "changed since it was signed") || strings.Contains(msg, "ASN.1") || strings.Contains(msg, "\n") {
		t.Fatalf("message %q", msg)
	}
	// The unchanged pack still verifies with the same bundle.
	if _, _, err := VerifyRequest(context.Background(), tr.policy, Signed{Archive: old, Bundle: bundle, Provenance: prov}, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
}
