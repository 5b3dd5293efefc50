package registry

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore-go/pkg/testing/ca"
	"github.com/sigstore/sigstore-go/pkg/tlog"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/packrun/packrun/packs"
)

// testKey is an in-memory ECDSA P-256 signing key and its PEM public key.
type testKey struct {
	priv   *ecdsa.PrivateKey
	pubPEM []byte
}

func newTestKey(t testing.TB) testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := marshalPublicKeyPEM(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return testKey{priv: priv, pubPEM: pub}
}

var testBuiltAt = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

const (
	testBuilder = "https://ci.example/builders/packs@v1"
	testSource  = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func testSignOptions() SignOptions {
	return SignOptions{BuilderID: testBuilder, SourceDigest: testSource, BuiltAt: testBuiltAt}
}

// trusted is a test key and a policy trusting it for vendor.acme.*.
type trusted struct {
	policy *Policy
	key    testKey
}

func newTrusted(t testing.TB) *trusted {
	t.Helper()
	k := newTestKey(t)
	p := NewPolicy()
	if err := p.AddKey("test", k.pubPEM, []string{"vendor.acme.*"}); err != nil {
		t.Fatal(err)
	}
	return &trusted{policy: p, key: k}
}

// buildPack packs the C hello example under name@version.
func buildPack(t testing.TB, name, version string) []byte {
	t.Helper()
	wasm, err := os.ReadFile("../examples/hello-c/hello.wasm")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":%q,"version":%q,"runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"hello.wasm","sha256":%q}]},"nodes":[{"typeId":"example.hello","kind":"node"}]}`, name, version, hex.EncodeToString(sum[:]))
	if err := os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hello.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signPack(t testing.TB, k testKey, archive []byte, name string) (bundle, provenance []byte) {
	t.Helper()
	b, p, err := Sign(context.Background(), archive, name, k.priv, testSignOptions())
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

// signDSSE signs an arbitrary in-toto statement as a provenance bundle, for
// tests that need statements Sign would never produce.
func signDSSE(t testing.TB, k testKey, payloadType string, stmt any) []byte {
	t.Helper()
	data, err := json.Marshal(stmt)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := newKeypair(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := signBundle(context.Background(), &sign.DSSEData{Data: data, PayloadType: payloadType}, kp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keylessSigstore is a VirtualSigstore plus a pinned trusted_root.json for it.
type keylessSigstore struct {
	vs       *ca.VirtualSigstore
	rootJSON []byte
}

// newKeylessSigstore builds an in-memory Fulcio/Rekor/TSA. withCTLog adds
// the virtual CT log to the trusted root (the virtual Fulcio issues
// certificates without SCTs, so bundles then must be refused).
func newKeylessSigstore(t testing.TB, withCTLog bool) *keylessSigstore {
	t.Helper()
	vs, err := ca.NewVirtualSigstore()
	if err != nil {
		t.Fatal(err)
	}
	var ct map[string]*root.TransparencyLog
	if withCTLog {
		ct = rawLogIDs(t, vs.CTLogs())
	}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, vs.FulcioCertificateAuthorities(), ct, vs.TimestampingAuthorities(), rawLogIDs(t, vs.RekorLogs()))
	if err != nil {
		t.Fatal(err)
	}
	js, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return &keylessSigstore{vs: vs, rootJSON: js}
}

// sign returns a keyless v0.3 bundle (certificate, RFC 3161 timestamp, Rekor
// entry with inclusion promise and proof) over artifact.
func (k *keylessSigstore) sign(t testing.TB, identity, issuer string, artifact []byte) []byte {
	t.Helper()
	e, err := k.vs.Sign(identity, issuer, artifact)
	if err != nil {
		t.Fatal(err)
	}
	return k.bundleJSON(t, e)
}

// attest returns a keyless v0.3 provenance bundle for a statement.
func (k *keylessSigstore) attest(t testing.TB, identity, issuer string, stmt []byte) []byte {
	t.Helper()
	e, err := k.vs.AttestAtTime(identity, issuer, stmt, time.Now().Add(5*time.Minute), true)
	if err != nil {
		t.Fatal(err)
	}
	return k.bundleJSON(t, e)
}

// bundleJSON serialises a VirtualSigstore TestEntity as a protobuf bundle,
// adding the Rekor inclusion promise (SET) and, where missing, an inclusion
// proof, which bundles v0.2+ must have.
func (k *keylessSigstore) bundleJSON(t testing.TB, e *ca.TestEntity) []byte {
	t.Helper()
	vc, err := e.VerificationContent()
	if err != nil {
		t.Fatal(err)
	}
	pb := &protobundle.Bundle{
		MediaType: bundleMediaTypeV03,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_Certificate{
				Certificate: &protocommon.X509Certificate{RawBytes: vc.Certificate().Raw},
			},
			TimestampVerificationData: &protobundle.TimestampVerificationData{},
		},
	}
	tss, err := e.Timestamps()
	if err != nil {
		t.Fatal(err)
	}
	for _, ts := range tss {
		pb.VerificationMaterial.TimestampVerificationData.Rfc3161Timestamps = append(
			pb.VerificationMaterial.TimestampVerificationData.Rfc3161Timestamps,
			&protocommon.RFC3161SignedTimestamp{SignedTimestamp: ts})
	}
	entries, err := e.TlogEntries()
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range entries {
		tle := proto.Clone(entry.TransparencyLogEntry()).(*protorekor.TransparencyLogEntry)
		var kv struct{ Kind, APIVersion string }
		if err := json.Unmarshal(tle.CanonicalizedBody, &kv); err != nil {
			t.Fatal(err)
		}
		tle.KindVersion = &protorekor.KindVersion{Kind: kv.Kind, Version: kv.APIVersion}
		set, err := k.vs.RekorSignPayload(tlog.RekorPayload{
			Body:           base64.StdEncoding.EncodeToString(tle.CanonicalizedBody),
			IntegratedTime: tle.IntegratedTime,
			LogIndex:       tle.LogIndex,
			LogID:          hex.EncodeToString(tle.LogId.KeyId),
		})
		if err != nil {
			t.Fatal(err)
		}
		tle.InclusionPromise = &protorekor.InclusionPromise{SignedEntryTimestamp: set}
		if tle.InclusionProof == nil {
			ip, err := k.vs.GetInclusionProof(tle.CanonicalizedBody)
			if err != nil {
				t.Fatal(err)
			}
			rootHash, err := hex.DecodeString(*ip.RootHash)
			if err != nil {
				t.Fatal(err)
			}
			tle.InclusionProof = &protorekor.InclusionProof{
				LogIndex:   *ip.LogIndex,
				RootHash:   rootHash,
				TreeSize:   *ip.TreeSize,
				Checkpoint: &protorekor.Checkpoint{Envelope: *ip.Checkpoint},
			}
		}
		pb.VerificationMaterial.TlogEntries = append(pb.VerificationMaterial.TlogEntries, tle)
	}
	sc, err := e.SignatureContent()
	if err != nil {
		t.Fatal(err)
	}
	if m := sc.MessageSignatureContent(); m != nil {
		pb.Content = &protobundle.Bundle_MessageSignature{MessageSignature: &protocommon.MessageSignature{
			MessageDigest: &protocommon.HashOutput{Algorithm: protocommon.HashAlgorithm_SHA2_256, Digest: m.Digest()},
			Signature:     m.Signature(),
		}}
	} else {
		env := sc.EnvelopeContent().RawEnvelope()
		payload, err := base64.StdEncoding.DecodeString(env.Payload)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
		if err != nil {
			t.Fatal(err)
		}
		pb.Content = &protobundle.Bundle_DsseEnvelope{DsseEnvelope: &protodsse.Envelope{
			Payload: payload, PayloadType: env.PayloadType,
			Signatures: []*protodsse.Signature{{Sig: sig}},
		}}
	}
	js, err := protojson.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rawLogIDs fixes VirtualSigstore's log IDs, which hold the hex text of the
// key id rather than its bytes; a trusted_root.json carries the bytes.
func rawLogIDs(t testing.TB, logs map[string]*root.TransparencyLog) map[string]*root.TransparencyLog {
	t.Helper()
	out := make(map[string]*root.TransparencyLog, len(logs))
	for k, l := range logs {
		c := *l
		raw, err := hex.DecodeString(string(l.ID))
		if err != nil {
			t.Fatal(err)
		}
		c.ID = raw
		out[k] = &c
	}
	return out
}
