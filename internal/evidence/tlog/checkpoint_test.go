package tlog

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

const origin = "example.com/packrun/home"

func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func testSigner(t testing.TB, seed byte) *Signer {
	t.Helper()
	s, err := NewSigner(origin, testKey(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCheckpointIsASignedNote(t *testing.T) {
	s := testSigner(t, 1)
	root := sha256.Sum256([]byte("root"))
	msg, err := s.Sign(Checkpoint{Origin: origin, Size: 42, Root: root[:], Extensions: []string{"Timestamp: 1"}})
	if err != nil {
		t.Fatal(err)
	}
	// The tlog-checkpoint body, then the signed-note signature line.
	body := origin + "\n42\n" + base64.StdEncoding.EncodeToString(root[:]) + "\nTimestamp: 1\n"
	if !strings.HasPrefix(string(msg), body+"\n— "+origin+" ") {
		t.Fatalf("note:\n%s", msg)
	}
	// The key hash is the signed-note one: SHA-256(name||0x0A||0x01||key)[:4],
	// the first four bytes of the signature line's base64.
	pub := testKey(1).Public().(ed25519.PublicKey)
	kh := sha256.Sum256(append([]byte(origin+"\n\x01"), pub...))
	sigLine := strings.TrimSpace(string(msg)[strings.LastIndex(string(msg), " ")+1:])
	sig, err := base64.StdEncoding.DecodeString(sigLine)
	if err != nil || !bytes.Equal(sig[:4], kh[:4]) || !ed25519.Verify(pub, []byte(body), sig[4:]) {
		t.Fatalf("signature line %q is not Ed25519 over the body with the key hash", sigLine)
	}
	if want := origin + "+" + hexHash(kh[:4]) + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, pub...)); s.VerifierKey() != want {
		t.Fatalf("verifier key %q, want %q", s.VerifierKey(), want)
	}
	cp, err := OpenCheckpoint(msg, s.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Origin != origin || cp.Size != 42 || !bytes.Equal(cp.Root, root[:]) || len(cp.Extensions) != 1 || cp.Extensions[0] != "Timestamp: 1" {
		t.Fatalf("opened %+v", cp)
	}
}

func hexHash(b []byte) string {
	const digits = "0123456789abcdef"
	var s []byte
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func TestOpenCheckpointRefusals(t *testing.T) {
	s := testSigner(t, 1)
	other := testSigner(t, 2)
	root := sha256.Sum256([]byte("root"))
	cp := Checkpoint{Origin: origin, Size: 42, Root: root[:]}
	good, err := s.Sign(cp)
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.Sign(cp)
	if err != nil {
		t.Fatal(err)
	}
	// A note signed by the right key over a bad body.
	signBody := func(body string) []byte {
		b, err := note.Sign(&note.Note{Text: body}, s.NoteSigner())
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r64 := base64.StdEncoding.EncodeToString(root[:])
	otherOrigin, err := NewSigner("other.example/log", testKey(1))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want string
	}{
		{"forged by another key", forged, "not signed by the log's key"},
		{"altered size", bytes.Replace(good, []byte("\n42\n"), []byte("\n43\n"), 1), "does not verify"},
		{"truncated", good[:len(good)-10], "not a signed note"},
		{"no signature", good[:bytes.Index(good, []byte("\n\n"))+2], "not a signed note"},
		{"reordered lines", signBody("42\n" + origin + "\n" + r64 + "\n"), "size invalid"},
		{"oversized", append(bytes.Repeat([]byte("x"), MaxCheckpointBytes), good...), "more than 16384"},
		{"two lines", signBody(origin + "\n42\n"), "too few newlines"},
		{"size with a leading zero", signBody(origin + "\n042\n" + r64 + "\n"), "canonical"},
		{"short root", signBody(origin + "\n42\nAAAA\n"), "root hash is 3 bytes"},
		{"empty extension line", signBody(origin + "\n42\n" + r64 + "\n\nx\n"), "extension line 0 is empty"},
		{"too many extensions", signBody(origin + "\n42\n" + r64 + "\n" + strings.Repeat("e\n", 17)), "17 extension lines"},
		{"another origin, same key", func() []byte {
			b, _ := otherOrigin.Sign(Checkpoint{Origin: "other.example/log", Size: 1, Root: root[:]})
			return b
		}(), "not signed by the log's key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := OpenCheckpoint(tc.msg, s.VerifierKey())
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
		})
	}
	if _, err := OpenCheckpoint(good, "not a key"); err == nil || !strings.Contains(err.Error(), "verifier key") {
		t.Fatalf("bad verifier key: %v", err)
	}
	if _, err := s.Sign(Checkpoint{Origin: "x", Size: 1, Root: root[:]}); err == nil {
		t.Fatal("signed another origin's checkpoint")
	}
	if _, err := NewSigner("bad origin", testKey(1)); err == nil {
		t.Fatal("accepted an origin with a space")
	}
}

// testLog is a log of n entries with its signer.
type testLog struct {
	tiles  *MemoryTiles
	signer *Signer
	size   uint64
}

func newTestLog(t testing.TB, n int) *testLog {
	l := &testLog{tiles: NewMemoryTiles(), signer: testSigner(t, 1)}
	grow(t, l.tiles, 0, n, 1000)
	l.size = uint64(n)
	return l
}

func (l *testLog) checkpoint(t testing.TB, size uint64) []byte {
	t.Helper()
	root, err := RootAt(context.Background(), l.tiles, size)
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.signer.Sign(Checkpoint{Origin: origin, Size: size, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (l *testLog) bundle(t testing.TB, index, size uint64) *Bundle {
	t.Helper()
	p, err := InclusionProof(context.Background(), l.tiles, index, size)
	if err != nil {
		t.Fatal(err)
	}
	return &Bundle{Entry: entry(int(index)), Index: index, Proof: p, Checkpoint: string(l.checkpoint(t, size))}
}

func TestBundleRoundTripAndCheck(t *testing.T) {
	l := newTestLog(t, 3000)
	b := l.bundle(t, 1234, 2999)
	enc, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeBundle(enc)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := CheckEntry(dec, l.signer.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if cp.Size != 2999 {
		t.Fatalf("proven against size %d", cp.Size)
	}
	// The leaf hash alone (the entry withheld) is enough.
	dec.LeafHash, dec.Entry = LeafHash(dec.Entry), nil
	if _, err := CheckEntry(dec, l.signer.VerifierKey()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckEntryRefusals(t *testing.T) {
	l := newTestLog(t, 3000)
	vkey := l.signer.VerifierKey()
	otherVkey := testSigner(t, 2).VerifierKey()
	mod := func(f func(b *Bundle)) *Bundle { b := l.bundle(t, 1234, 2999); f(b); return b }
	for _, tc := range []struct {
		name string
		b    *Bundle
		vkey string
		want string
	}{
		{"another entry", mod(func(b *Bundle) { b.Entry = entry(1235) }), vkey, "not the checkpoint's"},
		{"another index", mod(func(b *Bundle) { b.Index = 1235 }), vkey, "not the checkpoint's"},
		{"leaf hash disagrees", mod(func(b *Bundle) { b.LeafHash = LeafHash(entry(1)) }), vkey, "leaf_hash is not the hash of entry"},
		{"checkpoint of another size", mod(func(b *Bundle) { b.Checkpoint = string(l.checkpoint(t, 3000)) }), vkey, "not the checkpoint's"},
		{"truncated proof", mod(func(b *Bundle) { b.Proof = b.Proof[1:] }), vkey, "wrong proof size"},
		{"another log's key", l.bundle(t, 1234, 2999), otherVkey, "not signed by the log's key"},
		{"nothing to prove", mod(func(b *Bundle) { b.Entry = nil }), vkey, "neither entry nor leaf_hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckEntry(tc.b, tc.vkey)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
		})
	}
}

func TestDecodeBundleRefusals(t *testing.T) {
	l := newTestLog(t, 10)
	good, err := l.bundle(t, 3, 10).Encode()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not JSON", "{", "proof bundle: not valid JSON"},
		{"duplicate key", `{"index":1,"index":2,"entry":"eA==","proof":[],"checkpoint":""}`, "duplicate key at $.index"},
		{"unknown key", `{"index":1,"entry":"eA==","proof":[],"checkpoint":"","extra":1}`, "unknown field"},
		{"trailing data", string(good) + "{}", "not valid JSON"},
		{"short proof hash", `{"index":1,"entry":"eA==","proof":["AAAA"],"checkpoint":""}`, "proof hash 0 is 3 bytes"},
		{"short leaf hash", `{"index":1,"leaf_hash":"AAAA","proof":[],"checkpoint":""}`, "leaf_hash is 3 bytes"},
		{"no entry", `{"index":1,"proof":[],"checkpoint":""}`, "neither entry nor leaf_hash"},
		{"negative index", `{"index":-1,"entry":"eA==","proof":[],"checkpoint":""}`, "index"},
		{"oversized", `{"entry":"` + strings.Repeat("A", MaxBundleBytes) + `"}`, "more than 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeBundle([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
		})
	}
	many := `{"index":1,"entry":"eA==","checkpoint":"","proof":[` + strings.TrimSuffix(strings.Repeat(`"`+base64.StdEncoding.EncodeToString(make([]byte, 32))+`",`, 66), ",") + `]}`
	if _, err := DecodeBundle([]byte(many)); err == nil || !strings.Contains(err.Error(), "66 proof hashes") {
		t.Fatalf("66 hashes: %v", err)
	}
}

func TestCheckConsistency(t *testing.T) {
	l := newTestLog(t, 5000)
	vkey := l.signer.VerifierKey()
	oldNote, newNote := l.checkpoint(t, 1000), l.checkpoint(t, 5000)
	p, err := ConsistencyProof(context.Background(), l.tiles, 1000, 5000)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := (&ConsistencyBundle{Old: string(oldNote), New: string(newNote), Proof: p}).Encode()
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeConsistencyBundle(enc)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := CheckConsistency([]byte(dec.Old), []byte(dec.New), dec.Proof, vkey); err != nil {
		t.Fatal(err)
	}

	// A log whose entry 10 was rewritten: its checkpoint is signed by the
	// same key but is not an extension of the old one.
	forked := NewMemoryTiles()
	hs := leafHashes(0, 5000)
	hs[10] = LeafHash([]byte("rewritten"))
	res, err := Integrate(context.Background(), forked, 0, hs)
	if err != nil {
		t.Fatal(err)
	}
	if err := forked.Write(res.Tiles); err != nil {
		t.Fatal(err)
	}
	forkNote, err := l.signer.Sign(Checkpoint{Origin: origin, Size: 5000, Root: res.Root})
	if err != nil {
		t.Fatal(err)
	}
	forkProof, err := ConsistencyProof(context.Background(), forked, 1000, 5000)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		old, cur []byte
		p        [][]byte
		vkey     string
		want     string
	}{
		{"fork", oldNote, forkNote, forkProof, vkey, "did not only grow"},
		{"fork with the honest proof", oldNote, forkNote, p, vkey, "did not only grow"},
		{"rollback", newNote, oldNote, p, vkey, "shrank from size 5000 to 1000"},
		{"old forged", l.checkpoint(t, 1000)[:20], newNote, p, vkey, "old checkpoint: not a signed note"},
		{"new by another key", oldNote, newNote, p, testSigner(t, 3).VerifierKey(), "old checkpoint: not signed by the log's key"},
		{"proof truncated", oldNote, newNote, p[:len(p)-1], vkey, "wrong proof size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := CheckConsistency(tc.old, tc.cur, tc.p, tc.vkey)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
		})
	}
}

// An auditor's check: the bundle's own key is trusted because it opens
// the saved checkpoint, and the bundle's Since proof must lead from the
// saved checkpoint to the bundle's.
func TestCheckSince(t *testing.T) {
	l := newTestLog(t, 3000)
	vkey := l.signer.VerifierKey()
	saved := l.checkpoint(t, 1000)
	withSince := func() *Bundle {
		b := l.bundle(t, 2500, 3000)
		b.VerifierKey = vkey
		p, err := ConsistencyProof(context.Background(), l.tiles, 1000, 3000)
		if err != nil {
			t.Fatal(err)
		}
		b.Since = &Since{Checkpoint: string(saved), Proof: p}
		enc, err := b.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if b, err = DecodeBundle(enc); err != nil {
			t.Fatal(err)
		}
		return b
	}
	cur, old, err := CheckSince(withSince(), saved, "")
	if err != nil || cur.Size != 3000 || old.Size != 1000 {
		t.Fatalf("CheckSince: %v, %v, %v", cur, old, err)
	}
	same := l.bundle(t, 5, 1000)
	if _, _, err := CheckSince(same, saved, vkey); err != nil {
		t.Fatalf("same size: %v", err)
	}
	other := testSigner(t, 7)
	otherNote, err := other.Sign(Checkpoint{Origin: origin, Size: 1000, Root: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(b *Bundle)
		saved []byte
		vkey  string
		want  string
	}{
		{"no key", func(b *Bundle) { b.VerifierKey = "" }, saved, "", "names no verifier key"},
		{"saved by another key", nil, otherNote, "", "saved checkpoint: not signed by the log's key"},
		{"bundle's key not the log's", func(b *Bundle) { b.VerifierKey = other.VerifierKey() }, saved, "", "saved checkpoint: not signed by the log's key"},
		{"no since", func(b *Bundle) { b.Since = nil }, saved, "", "no consistency proof from the saved checkpoint"},
		{"since from elsewhere", func(b *Bundle) { b.Since.Checkpoint = string(l.checkpoint(t, 999)) }, saved, "", "starts from size 999"},
		{"since proof altered", func(b *Bundle) { b.Since.Proof[0][0] ^= 1 }, saved, "", "did not only grow"},
		{"saved empty", nil, l.checkpoint(t, 3000)[:0], "", "saved checkpoint: not a signed note"},
		{"bundle older", func(b *Bundle) { *b = *l.bundle(t, 1, 500); b.VerifierKey = vkey }, saved, "", "older than the saved one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := withSince()
			if tc.edit != nil {
				tc.edit(b)
			}
			_, _, err := CheckSince(b, tc.saved, tc.vkey)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("err = %v, want one line with %q", err, tc.want)
			}
		})
	}
}
