package registry

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyKeyless(t *testing.T) {
	ctx := context.Background()
	const (
		name   = "vendor.acme.hello"
		issuer = "https://accounts.example.com"
		alice  = "alice@acme.example"
	)
	archive := []byte("keyless archive")
	ks := newKeylessSigstore(t, false)
	otherSigstore := newKeylessSigstore(t, false)
	withCT := newKeylessSigstore(t, true)

	opts := testSignOptions()
	opts.BuildType = DefaultBuildType
	stmt, err := buildStatement(name, sha256hex(archive), opts)
	if err != nil {
		t.Fatal(err)
	}
	sig := ks.sign(t, alice, issuer, archive)
	prov := ks.attest(t, alice, issuer, stmt)
	wrongIssuerSig := ks.sign(t, alice, "https://evil.example.com", archive)
	wrongSubjectSig := ks.sign(t, "mallory@acme.example", issuer, archive)
	suffixSubjectSig := ks.sign(t, alice+".evil.example", issuer, archive)
	foreignSig := otherSigstore.sign(t, alice, issuer, archive)
	ctSig := withCT.sign(t, alice, issuer, archive)
	wrongSubjectProv := ks.attest(t, "mallory@acme.example", issuer, stmt)
	strip := func(b []byte, fields ...string) []byte {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range fields {
			delete(m["verificationMaterial"].(map[string]any), f)
		}
		out, _ := json.Marshal(m)
		return out
	}
	noTlogSig := strip(sig, "tlogEntries")
	noTimeSig := strip(sig, "tlogEntries", "timestampVerificationData")

	policy := func(root []byte, ids ...TrustedIdentity) *Policy {
		p := NewPolicy()
		p.TrustedRoot = &TrustedRootRef{JSON: root}
		for _, id := range ids {
			if err := p.AddIdentity(id); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	aliceID := TrustedIdentity{Name: "alice", Issuer: issuer, Subject: alice, Namespaces: []string{"vendor.acme.*"}}
	acmeRE := TrustedIdentity{Name: "acme-people", Issuer: issuer, SubjectRegexp: `[a-z]+@acme\.example`, Namespaces: []string{"vendor.acme.*"}}
	aliceElsewhere := TrustedIdentity{Name: "alice", Issuer: issuer, Subject: alice, Namespaces: []string{"community.alice.*"}}

	keyOnly := NewPolicy()
	if err := keyOnly.AddKey("k", newTestKey(t).pubPEM, []string{"vendor.acme.*"}); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		sig, prov  []byte
		policy     *Policy
		wantCheck  string
		wantSigner string
	}{
		{name: "identity accepted", sig: sig, prov: prov, policy: policy(ks.rootJSON, aliceID),
			wantSigner: "identity:alice (" + issuer + " " + alice + ")"},
		{name: "subject regexp accepted", sig: sig, prov: prov, policy: policy(ks.rootJSON, acmeRE),
			wantSigner: "identity:acme-people (" + issuer + " " + alice + ")"},
		{name: "wrong issuer", sig: wrongIssuerSig, prov: prov, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "wrong subject", sig: wrongSubjectSig, prov: prov, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "subject regexp is anchored", sig: suffixSubjectSig, prov: prov, policy: policy(ks.rootJSON, acmeRE), wantCheck: CheckSignature},
		{name: "identity outside its namespace", sig: sig, prov: prov, policy: policy(ks.rootJSON, aliceElsewhere), wantCheck: CheckNamespace},
		{name: "certificate from another Fulcio", sig: foreignSig, prov: prov, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "root lists a CT log and the certificate has no SCT", sig: ctSig, prov: prov, policy: policy(withCT.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "no transparency-log entry", sig: noTlogSig, prov: prov, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "no tlog entry and no timestamp", sig: noTimeSig, prov: prov, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckSignature},
		{name: "policy trusts only keys", sig: sig, prov: prov, policy: keyOnly, wantCheck: CheckSignature},
		{name: "keyless provenance by another identity", sig: sig, prov: wrongSubjectProv, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckProvenance},
		{name: "keyless signature as provenance", sig: sig, prov: sig, policy: policy(ks.rootJSON, aliceID), wantCheck: CheckBundle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Verify(ctx, tt.policy, Signed{Archive: archive, Bundle: tt.sig, Provenance: tt.prov}, name, VerifyOptions{})
			if tt.wantCheck != "" {
				checkRefusal(t, err, tt.wantCheck)
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if v.Signer != tt.wantSigner {
				t.Errorf("Signer = %q, want %q", v.Signer, tt.wantSigner)
			}
			if !strings.HasPrefix(v.KeyID, "sha256:") {
				t.Errorf("KeyID = %q, want the certificate fingerprint", v.KeyID)
			}
			if v.Provenance == nil || v.Provenance.BuilderID != testBuilder || v.Provenance.Signer != tt.wantSigner {
				t.Errorf("Provenance = %+v", v.Provenance)
			}
		})
	}

	t.Run("trusted root by path relative to trust.json", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "trusted_root.json"), ks.rootJSON, 0o644); err != nil {
			t.Fatal(err)
		}
		p := NewPolicy()
		p.TrustedRoot = &TrustedRootRef{Path: "trusted_root.json"}
		if err := p.AddIdentity(aliceID); err != nil {
			t.Fatal(err)
		}
		if err := p.Save(filepath.Join(dir, "trust.json")); err != nil {
			t.Fatal(err)
		}
		loaded, err := LoadPolicy(filepath.Join(dir, "trust.json"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ctx, loaded, Signed{Archive: archive, Bundle: sig, Provenance: prov}, name, VerifyOptions{}); err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if err := os.Remove(filepath.Join(dir, "trusted_root.json")); err != nil {
			t.Fatal(err)
		}
		_, err = Verify(ctx, loaded, Signed{Archive: archive, Bundle: sig, Provenance: prov}, name, VerifyOptions{})
		checkRefusal(t, err, CheckPolicy)
	})

	t.Run("identities without a trusted root are invalid", func(t *testing.T) {
		p := NewPolicy()
		if err := p.AddIdentity(aliceID); err != nil {
			t.Fatal(err)
		}
		if err := p.Validate(); err == nil {
			t.Fatal("Validate accepted identities without trustedRoot")
		}
		_, err := Verify(ctx, p, Signed{Archive: archive, Bundle: sig, Provenance: prov}, name, VerifyOptions{})
		checkRefusal(t, err, CheckPolicy)
	})

	t.Run("inline root survives a save and load", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "trust.json")
		if err := policy(ks.rootJSON, aliceID).Save(path); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(path)
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(raw, &doc); err != nil || !strings.HasPrefix(string(doc["trustedRoot"]), "{") {
			t.Fatalf("trustedRoot not inline: %v %s", err, doc["trustedRoot"])
		}
		loaded, err := LoadPolicy(path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ctx, loaded, Signed{Archive: archive, Bundle: sig, Provenance: prov}, name, VerifyOptions{}); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
}
