package registry

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
)

// TestCanonicalJSONRFC8785 pins the canonicaliser openwop v2 signatures
// depend on to RFC 8785's own example (§3.2.3): numbers in ECMAScript
// form, members sorted, strings minimally escaped.
func TestCanonicalJSONRFC8785(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	got, err := jsoncanonicalizer.Transform([]byte(in))
	if err != nil || string(got) != want {
		t.Fatalf("got %s (%v)\nwant %s", got, err, want)
	}
	// Members are sorted by their UTF-16 code units, not their UTF-8 bytes.
	got, err = jsoncanonicalizer.Transform([]byte(`{"\ud83d\ude00":1,"\ufb01":2}`))
	if err != nil || string(got) != `{"😀":1,"ﬁ":2}` {
		t.Fatalf("got %s (%v)", got, err)
	}
}

// TestIntegrityPin: sha256-<base64> pins round-trip; anything else is an
// integrity refusal.
func TestIntegrityPin(t *testing.T) {
	b := []byte("archive")
	pin := Integrity(b)
	sum, err := ParseIntegrity(pin)
	if err != nil || len(sum) != 32 {
		t.Fatalf("%s: %v", pin, err)
	}
	for _, bad := range []string{"", "sha512-" + strings.TrimPrefix(pin, "sha256-"), "sha256-AAAA", "sha256-%%%", strings.ToLower(pin) + "x"} {
		var ve *VerifyError
		if _, err := ParseIntegrity(bad); !errors.As(err, &ve) || ve.Check != CheckIntegrity {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if verr := checkIntegrity(pin, sum, "x"); verr != nil {
		t.Fatal(verr)
	}
	if verr := checkIntegrity(Integrity([]byte("other")), sum, "x"); verr == nil || verr.Check != CheckIntegrity {
		t.Fatalf("a different archive passed its pin: %v", verr)
	}
}

// TestOpenwopCodeInMessage: a refusal of an openwop pack names openwop's
// code beside packrun's check.
func TestOpenwopCodeInMessage(t *testing.T) {
	err := withOpenwopCode(refuse("vendor.a.b", CheckNamespace, nil, "no"))
	if got := err.Error(); got != "verify vendor.a.b: namespace (pack_namespace_unauthorized): no" {
		t.Fatal(got)
	}
}

// TestIntegrityPinIsNotASignature: a pin alone never vouches for a pack,
// opened or not, and a pin over a signed packrun pack adds a check.
func TestIntegrityPinIsNotASignature(t *testing.T) {
	tr := newTrusted(t)
	arch := buildPack(t, "vendor.acme.tools", "1.0.0")
	pinned := Signed{Archive: arch, Integrity: Integrity(arch)}
	var ve *VerifyError
	if _, err := Verify(context.Background(), tr.policy, pinned, "vendor.acme.tools", VerifyOptions{}); !errors.As(err, &ve) || ve.Check != CheckSignature {
		t.Fatalf("Verify of a pinned, unsigned pack: %v", err)
	}
	if _, _, err := VerifyRequest(context.Background(), tr.policy, pinned, VerifyOptions{}); !errors.As(err, &ve) || ve.Check != CheckSignature {
		t.Fatalf("VerifyRequest of a pinned, unsigned pack: %v", err)
	}
	b, p := signPack(t, tr.key, arch, "vendor.acme.tools")
	signed := Signed{Archive: arch, Bundle: b, Provenance: p, Integrity: Integrity(arch)}
	if _, _, err := VerifyRequest(context.Background(), tr.policy, signed, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
	signed.Integrity = Integrity(append(arch, 0))
	if _, _, err := VerifyRequest(context.Background(), tr.policy, signed, VerifyOptions{}); !errors.As(err, &ve) || ve.Check != CheckIntegrity || ve.Code != CodeIntegrityFailure {
		t.Fatalf("wrong pin: %v", err)
	}
}
