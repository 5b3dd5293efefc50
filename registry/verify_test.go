package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// checkRefusal asserts that err is a *VerifyError for check that matches
// ErrUntrusted and reads as one line.
func checkRefusal(t *testing.T, err error, check string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want refusal by %q", check)
	}
	if !errors.Is(err, ErrUntrusted) {
		t.Fatalf("error %v does not match ErrUntrusted", err)
	}
	var ve *VerifyError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *VerifyError", err, err)
	}
	if ve.Check != check {
		t.Fatalf("refused by %q, want %q: %v", ve.Check, check, err)
	}
	if strings.ContainsAny(err.Error(), "\n\r") {
		t.Errorf("error message is not one line: %q", err.Error())
	}
	t.Logf("refused as expected: %v", err)
}

func statementFor(name string, archive []byte, predicateType string) map[string]any {
	sum := sha256.Sum256(archive)
	return map[string]any{
		"_type":         InTotoStatementType,
		"subject":       []any{map[string]any{"name": name, "digest": map[string]string{"sha256": hex.EncodeToString(sum[:])}}},
		"predicateType": predicateType,
		"predicate": map[string]any{
			"buildDefinition": map[string]any{"buildType": DefaultBuildType, "externalParameters": map[string]any{}},
			"runDetails":      map[string]any{"builder": map[string]any{"id": testBuilder}},
		},
	}
}

func TestVerifyKeyBased(t *testing.T) {
	ctx := context.Background()
	const name = "vendor.acme.hello"
	archive := []byte("archive bytes of vendor.acme.hello 1.0.0")
	other := []byte("archive bytes of vendor.acme.other 2.0.0")
	tampered := bytes.Clone(archive)
	tampered[3] ^= 0x01

	acme, stranger, otherOrg := newTestKey(t), newTestKey(t), newTestKey(t)

	policy := func(mod func(*Policy)) *Policy {
		p := NewPolicy()
		if err := p.AddKey("acme", acme.pubPEM, []string{"vendor.acme.*"}); err != nil {
			t.Fatal(err)
		}
		if err := p.AddKey("other-org", otherOrg.pubPEM, []string{"vendor.other.*"}); err != nil {
			t.Fatal(err)
		}
		if mod != nil {
			mod(p)
		}
		return p
	}

	sig, prov := signPack(t, acme, archive, name)
	strangerSig, strangerProv := signPack(t, stranger, archive, name)
	_, otherOrgProv := signPack(t, otherOrg, archive, name)
	_, otherArchiveProv := signPack(t, acme, other, name)
	_, otherNameProv := signPack(t, acme, archive, "vendor.acme.other")
	outSig, outProv := signPack(t, acme, archive, "vendor.other.tool")
	prefixSig, prefixProv := signPack(t, acme, archive, "vendor.acme")
	spdxProv := signDSSE(t, acme, InTotoPayloadType, statementFor(name, archive, "https://spdx.dev/Document"))
	slsa02Prov := signDSSE(t, acme, InTotoPayloadType, statementFor(name, archive, "https://slsa.dev/provenance/v0.2"))
	wrongPayloadType := signDSSE(t, acme, "application/json", statementFor(name, archive, SLSAProvenanceV1))

	// The bundle's key hint is only a hint: a wrong one still verifies by
	// trying each trusted key.
	var hinted map[string]any
	if err := json.Unmarshal(sig, &hinted); err != nil {
		t.Fatal(err)
	}
	hinted["verificationMaterial"].(map[string]any)["publicKey"].(map[string]any)["hint"] = "not-the-hint"
	badHintSig, _ := json.Marshal(hinted)

	// Provenance whose payload was swapped after signing (same subject,
	// another builder), keeping the original signature.
	var edited map[string]any
	if err := json.Unmarshal(prov, &edited); err != nil {
		t.Fatal(err)
	}
	st := statementFor(name, archive, SLSAProvenanceV1)
	st["predicate"].(map[string]any)["runDetails"] = map[string]any{"builder": map[string]any{"id": "https://evil.example/builder"}}
	payload, _ := json.Marshal(st)
	edited["dsseEnvelope"].(map[string]any)["payload"] = payload // []byte marshals as base64
	editedProv, _ := json.Marshal(edited)

	tests := []struct {
		name       string
		archive    []byte
		pack       string
		sig, prov  []byte
		policy     *Policy
		opts       VerifyOptions
		wantCheck  string // "" = accepted
		wantSigner string
	}{
		{name: "happy path", archive: archive, pack: name, sig: sig, prov: prov, policy: policy(nil), wantSigner: "key:acme"},
		{name: "wrong key hint still verifies", archive: archive, pack: name, sig: badHintSig, prov: prov, policy: policy(nil), wantSigner: "key:acme"},
		{name: "builder allowed", archive: archive, pack: name, sig: sig, prov: prov,
			policy: policy(func(p *Policy) { p.BuilderIDs = []string{"x", testBuilder} }), wantSigner: "key:acme"},
		{name: "no provenance, not required", archive: archive, pack: name, sig: sig,
			policy: policy(func(p *Policy) { p.RequireProvenance = false }), wantSigner: "key:acme"},
		{name: "same key under two names picks the one for the namespace", archive: archive, pack: "vendor.other.tool", sig: outSig, prov: outProv,
			policy: policy(func(p *Policy) {
				if err := p.AddKey("acme-for-other", acme.pubPEM, []string{"vendor.other.tool"}); err != nil {
					t.Fatal(err)
				}
			}), wantSigner: "key:acme-for-other"},

		{name: "tampered archive byte", archive: tampered, pack: name, sig: sig, prov: prov, policy: policy(nil), wantCheck: CheckSignature},
		{name: "untrusted key", archive: archive, pack: name, sig: strangerSig, prov: strangerProv, policy: policy(nil), wantCheck: CheckSignature},
		{name: "empty policy trusts nothing", archive: archive, pack: name, sig: sig, prov: prov, policy: NewPolicy(), wantCheck: CheckSignature},
		{name: "trusted key outside its namespace", archive: archive, pack: "vendor.other.tool", sig: outSig, prov: outProv, policy: policy(nil), wantCheck: CheckNamespace},
		{name: "prefix.* does not cover the prefix itself", archive: archive, pack: "vendor.acme", sig: prefixSig, prov: prefixProv, policy: policy(nil), wantCheck: CheckNamespace},
		{name: "provenance subject is another pack's digest", archive: archive, pack: name, sig: sig, prov: otherArchiveProv, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "provenance subject has another name", archive: archive, pack: name, sig: sig, prov: otherNameProv, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "predicate type is not SLSA", archive: archive, pack: name, sig: sig, prov: spdxProv, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "predicate type is SLSA v0.2", archive: archive, pack: name, sig: sig, prov: slsa02Prov, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "DSSE payload type is not in-toto", archive: archive, pack: name, sig: sig, prov: wrongPayloadType, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "provenance edited after signing", archive: archive, pack: name, sig: sig, prov: editedProv, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "provenance by untrusted key", archive: archive, pack: name, sig: sig, prov: strangerProv, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "provenance by key trusted elsewhere", archive: archive, pack: name, sig: sig, prov: otherOrgProv, policy: policy(nil), wantCheck: CheckNamespace},
		{name: "swapped bundles", archive: archive, pack: name, sig: prov, prov: sig, policy: policy(nil), wantCheck: CheckBundle},
		{name: "signature bundle given as provenance", archive: archive, pack: name, sig: sig, prov: sig, policy: policy(nil), wantCheck: CheckBundle},
		{name: "provenance bundle given as signature", archive: archive, pack: name, sig: prov, prov: prov, policy: policy(nil), wantCheck: CheckBundle},
		{name: "missing provenance when required", archive: archive, pack: name, sig: sig, policy: policy(nil), wantCheck: CheckProvenance},
		{name: "builderIds make provenance required", archive: archive, pack: name, sig: sig,
			policy: policy(func(p *Policy) { p.RequireProvenance = false; p.BuilderIDs = []string{testBuilder} }), wantCheck: CheckProvenance},
		{name: "builder id not allowed", archive: archive, pack: name, sig: sig, prov: prov,
			policy: policy(func(p *Policy) { p.BuilderIDs = []string{"https://ci.example/other"} }), wantCheck: CheckBuilder},
		{name: "garbage bundle", archive: archive, pack: name, sig: []byte("not json"), prov: prov, policy: policy(nil), wantCheck: CheckBundle},
		{name: "oversized bundle", archive: archive, pack: name, sig: make([]byte, MaxBundleSize+1), prov: prov, policy: policy(nil), wantCheck: CheckBundle},
		{name: "invalid pack name", archive: archive, pack: "Vendor..x", sig: sig, prov: prov, policy: policy(nil), wantCheck: CheckNamespace},

		{name: "unsigned refused by default", archive: archive, pack: name, policy: policy(nil), wantCheck: CheckUnsigned},
		{name: "unsigned accepted with AllowUnsignedUnsafe", archive: archive, pack: name, policy: policy(nil),
			opts: VerifyOptions{AllowUnsignedUnsafe: true}, wantSigner: "unsigned"},
		{name: "AllowUnsignedUnsafe still checks a bundle that is present", archive: tampered, pack: name, sig: sig, prov: prov, policy: policy(nil),
			opts: VerifyOptions{AllowUnsignedUnsafe: true}, wantCheck: CheckSignature},
		{name: "AllowUnsignedUnsafe still checks provenance that is present", archive: archive, pack: name, prov: otherArchiveProv, policy: policy(nil),
			opts: VerifyOptions{AllowUnsignedUnsafe: true}, wantCheck: CheckProvenance},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Verify(ctx, tt.policy, Signed{Archive: tt.archive, Bundle: tt.sig, Provenance: tt.prov}, tt.pack, tt.opts)
			if tt.wantCheck != "" {
				checkRefusal(t, err, tt.wantCheck)
				if v != nil {
					t.Errorf("refusal returned a verdict %+v", v)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if v.Signer != tt.wantSigner {
				t.Errorf("Signer = %q, want %q", v.Signer, tt.wantSigner)
			}
			if tt.wantSigner == "unsigned" {
				if !v.Unsigned || v.Provenance != nil {
					t.Errorf("unsigned verdict = %+v", v)
				}
				return
			}
			wantID, _ := keyID(acme.priv.Public())
			if v.KeyID != wantID {
				t.Errorf("KeyID = %q, want %q", v.KeyID, wantID)
			}
			if tt.prov == nil {
				if v.Provenance != nil {
					t.Errorf("Provenance = %+v, want nil", v.Provenance)
				}
				return
			}
			want := Provenance{BuilderID: testBuilder, BuildType: DefaultBuildType, SourceDigest: testSource, BuiltAt: testBuiltAt, Signer: tt.wantSigner}
			if v.Provenance == nil || *v.Provenance != want {
				t.Errorf("Provenance = %+v, want %+v", v.Provenance, want)
			}
		})
	}
}

func TestVerifyPolicyErrors(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t)
	sig, prov := signPack(t, k, []byte("a"), "local.a")
	if _, err := Verify(ctx, nil, Signed{Archive: []byte("a"), Bundle: sig, Provenance: prov}, "local.a", VerifyOptions{}); !errors.Is(err, ErrUntrusted) {
		t.Errorf("nil policy: %v", err)
	}
	bad := NewPolicy()
	bad.Keys = []TrustedKey{{Name: "k", PublicKey: "junk", Namespaces: []string{"local.*"}}}
	_, err := Verify(ctx, bad, Signed{Archive: []byte("a"), Bundle: sig, Provenance: prov}, "local.a", VerifyOptions{})
	checkRefusal(t, err, CheckPolicy)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	p := NewPolicy()
	if err := p.AddKey("k", k.pubPEM, []string{"local.*"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(cctx, p, Signed{Archive: []byte("a"), Bundle: sig, Provenance: prov}, "local.a", VerifyOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: %v", err)
	}
	if _, err := Verify(ctx, p, Signed{Archive: []byte("a"), Bundle: sig, Provenance: prov}, "local.a", VerifyOptions{}); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestSignOptions(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t)
	tests := []struct {
		name string
		pack string
		opts SignOptions
		ok   bool
	}{
		{"defaults", "local.a", SignOptions{BuilderID: "local:me"}, true},
		{"no builder", "local.a", SignOptions{}, false},
		{"bad source digest", "local.a", SignOptions{BuilderID: "b", SourceDigest: "ABC"}, false},
		{"bad name", "local a", SignOptions{BuilderID: "b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, prov, err := Sign(ctx, []byte("x"), tt.pack, k.priv, tt.opts)
			if (err == nil) != tt.ok {
				t.Fatalf("Sign err = %v, want ok=%v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			p := NewPolicy()
			if err := p.AddKey("k", k.pubPEM, []string{tt.pack}); err != nil {
				t.Fatal(err)
			}
			sig, _, _ := Sign(ctx, []byte("x"), tt.pack, k.priv, tt.opts)
			v, err := Verify(ctx, p, Signed{Archive: []byte("x"), Bundle: sig, Provenance: prov}, tt.pack, VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v.Provenance.BuildType != DefaultBuildType || v.Provenance.BuiltAt.IsZero() || v.Provenance.SourceDigest != "" {
				t.Errorf("provenance defaults: %+v", v.Provenance)
			}
		})
	}
}

// TestSignedStatementShape pins the provenance payload cosign and other
// SLSA consumers read.
func TestSignedStatementShape(t *testing.T) {
	k := newTestKey(t)
	archive := []byte("shape")
	_, prov := signPack(t, k, archive, "vendor.acme.shape")
	var b struct {
		MediaType    string
		DsseEnvelope struct {
			Payload     []byte
			PayloadType string
			Signatures  []struct{ Sig []byte }
		}
		VerificationMaterial struct{ PublicKey struct{ Hint string } }
	}
	if err := json.Unmarshal(prov, &b); err != nil {
		t.Fatal(err)
	}
	if b.MediaType != bundleMediaTypeV03 || b.DsseEnvelope.PayloadType != InTotoPayloadType || len(b.DsseEnvelope.Signatures) != 1 {
		t.Fatalf("bundle: %+v", b)
	}
	if id, _ := keyID(k.priv.Public()); b.VerificationMaterial.PublicKey.Hint != id {
		t.Errorf("hint %q, want %q", b.VerificationMaterial.PublicKey.Hint, id)
	}
	var st struct {
		Type      string `json:"_type"`
		Subject   []resourceDescriptor
		Predicate struct {
			BuildDefinition struct {
				BuildType            string
				ExternalParameters   map[string]any
				ResolvedDependencies []resourceDescriptor
			}
			RunDetails struct {
				Builder  struct{ ID string }
				Metadata struct{ StartedOn, FinishedOn string }
			}
		}
		PredicateType string
	}
	if err := json.Unmarshal(b.DsseEnvelope.Payload, &st); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(archive)
	if st.Type != InTotoStatementType || st.PredicateType != SLSAProvenanceV1 || len(st.Subject) != 1 ||
		st.Subject[0].Name != "vendor.acme.shape" || st.Subject[0].Digest["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("statement: %+v", st)
	}
	pd := st.Predicate
	if pd.BuildDefinition.BuildType != DefaultBuildType || pd.RunDetails.Builder.ID != testBuilder ||
		pd.RunDetails.Metadata.StartedOn != "2025-06-01T12:00:00Z" || pd.RunDetails.Metadata.FinishedOn != "2025-06-01T12:00:00Z" ||
		len(pd.BuildDefinition.ResolvedDependencies) != 1 || pd.BuildDefinition.ResolvedDependencies[0].URI != "file:source" ||
		pd.BuildDefinition.ResolvedDependencies[0].Digest["sha256"] != testSource ||
		pd.BuildDefinition.ExternalParameters["source"] == nil {
		t.Errorf("predicate: %+v", pd)
	}
}

// Every refusal is one short line, however long the names, patterns and
// lists it could echo: values are clipped and lists cut to their first few.
func TestRefusalsAreBounded(t *testing.T) {
	ctx := context.Background()
	k := newTestKey(t)
	long := strings.Repeat("a", 250)
	var patterns []string
	for i := range maxNamespacePatterns {
		patterns = append(patterns, fmt.Sprintf("vendor.%s%03d.*", long[:240], i))
	}
	p := NewPolicy()
	if err := p.AddKey("k", k.pubPEM, patterns); err != nil {
		t.Fatal(err)
	}
	p.BuilderIDs = []string{testBuilder}
	for range 100 {
		p.BuilderIDs = append(p.BuilderIDs, "https://"+strings.Repeat("b", 1000))
	}
	archive := []byte("archive")
	sig, prov := signPack(t, k, archive, "vendor.acme.x")
	huge := strings.Repeat("x", 1<<20)
	inside := patterns[0][:len(patterns[0])-2] + ".x"
	insideSig, _ := signPack(t, k, archive, inside)
	badBuilderStmt := statementFor(inside, archive, SLSAProvenanceV1)
	badBuilderStmt["predicate"].(map[string]any)["runDetails"] = map[string]any{"builder": map[string]any{"id": huge[:200<<10]}}
	badBuilder := signDSSE(t, k, InTotoPayloadType, badBuilderStmt)

	for _, tc := range []struct {
		name        string
		err         func() error
		want        string
		untrustedBy string // the check, when err is a refusal
	}{
		{"namespace list", func() error {
			_, err := Verify(ctx, p, Signed{Archive: archive, Bundle: sig, Provenance: prov}, "vendor.acme.x", VerifyOptions{})
			return err
		}, "and 251 more", CheckNamespace},
		{"builder id and builderIds", func() error {
			_, err := Verify(ctx, p, Signed{Archive: archive, Bundle: insideSig, Provenance: badBuilder}, inside, VerifyOptions{})
			return err
		}, "and 96 more", CheckBuilder},
		{"pack name", func() error {
			_, err := Verify(ctx, p, Signed{Archive: archive, Bundle: sig, Provenance: prov}, huge, VerifyOptions{})
			return err
		}, "invalid pack name", CheckNamespace},
		{"policy entry name", func() error {
			q := NewPolicy()
			q.Keys = []TrustedKey{{Name: huge, PublicKey: string(k.pubPEM), Namespaces: []string{"local.*"}}}
			return q.Validate()
		}, "longer than 128", ""},
		{"namespace pattern", func() error {
			return NewPolicy().AddKey("k", k.pubPEM, []string{"vendor." + huge + "*"})
		}, "namespace pattern", ""},
		{"unknown field in trust.json", func() error {
			_, err := parsePolicy([]byte(`{"` + huge + `": 1}`))
			return err
		}, "unknown field", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if tc.untrustedBy != "" {
				checkRefusal(t, err, tc.untrustedBy)
			}
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if len(msg) > 2048 || strings.ContainsAny(msg, "\n\r") || !strings.Contains(msg, tc.want) {
				t.Fatalf("%d bytes, want one line under 2 KiB with %q: %.300q", len(msg), tc.want, msg)
			}
		})
	}
}
