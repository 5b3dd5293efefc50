package witness

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// FuzzParseAddCheckpoint: the request decoder never panics, accepts only
// what it can re-encode byte for byte, and a witness handed any body
// either cosigns a checkpoint that extends its state or changes nothing.
func FuzzParseAddCheckpoint(f *testing.F) {
	l := newTestLog(f, "example.com/fuzz").grow(12, "a")
	w, state := newTestWitness(f, l)
	if _, err := w.Add(l.body(0, 5)); err != nil {
		f.Fatal(err)
	}
	f.Add(l.body(5, 9))
	f.Add(l.body(5, 5))
	f.Add(l.body(0, 3))
	f.Add(l.body(3, 12))
	f.Add([]byte("old 5\n\n"))
	f.Add([]byte("old 0\nAAAA\n\nx\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		before, err := stateDir(state).load(l.origin)
		if err != nil {
			t.Fatal(err)
		}
		r, perr := ParseAddCheckpoint(body)
		if perr == nil && !bytes.Equal(r.Marshal(), body) {
			t.Fatalf("accepted %q but re-encodes as %q", body, r.Marshal())
		}
		cosig, err := w.Add(body)
		after, lerr := stateDir(state).load(l.origin)
		if lerr != nil {
			t.Fatal(lerr)
		}
		if err != nil {
			if after.Size != before.Size || !bytes.Equal(after.Hash, before.Hash) {
				t.Fatalf("refused (%v) but the state moved from %d to %d", err, before.Size, after.Size)
			}
			return
		}
		if perr != nil {
			t.Fatalf("cosigned a body the decoder refuses: %v", perr)
		}
		if after.Size < before.Size || !bytes.Equal(after.Hash, l.tree.HashAt(after.Size)) {
			t.Fatalf("cosigned a checkpoint off the log: size %d", after.Size)
		}
		if _, err := ParseCosignature(cosig); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzParseCosignature: the cosignature line decoder never panics and
// accepts only lines of the exact form, which it re-encodes byte for byte.
func FuzzParseCosignature(f *testing.F) {
	l := newTestLog(f, "example.com/fuzz").grow(4, "a")
	w, _ := newTestWitness(f, l)
	cosig, err := w.Add(l.body(0, 4))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cosig)
	f.Add([]byte("— name AAAA\n"))
	f.Add([]byte("— name " + base64.StdEncoding.EncodeToString(make([]byte, CosignatureSize))))
	f.Add(bytes.TrimSuffix(cosig, []byte("\n")))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := ParseCosignature(line)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		if len(c.Signature) != ed25519.SignatureSize {
			t.Fatalf("signature of %d bytes", len(c.Signature))
		}
		raw := make([]byte, 0, CosignatureSize)
		raw = append(raw, byte(c.KeyHash>>24), byte(c.KeyHash>>16), byte(c.KeyHash>>8), byte(c.KeyHash))
		ts := uint64(c.Time.Unix())
		for i := 7; i >= 0; i-- {
			raw = append(raw, byte(ts>>(8*i)))
		}
		raw = append(raw, c.Signature...)
		again := "— " + c.Name + " " + base64.StdEncoding.EncodeToString(raw)
		if again != string(bytes.TrimSuffix(line, []byte("\n"))) {
			t.Fatalf("accepted %q but re-encodes as %q", line, again)
		}
	})
}

// FuzzVerifyCosignature: verifying any note against the witness key never
// panics, and only the witness's own cosignature over the exact text
// verifies.
func FuzzVerifyCosignature(f *testing.F) {
	l := newTestLog(f, "example.com/fuzz").grow(4, "a")
	w, _ := newTestWitness(f, l)
	cosig, err := w.Add(l.body(0, 4))
	if err != nil {
		f.Fatal(err)
	}
	good := AppendCosignature(l.checkpoint(4), cosig)
	f.Add(good)
	f.Add(l.checkpoint(4))
	f.Add(AppendCosignature(l.checkpoint(3), cosig))
	f.Fuzz(func(t *testing.T, n []byte) {
		if _, err := VerifyCosignature(n, w.Key().VKey()); err != nil {
			return
		}
		// It verified: the text must be the one the witness cosigned.
		text, _, _ := bytes.Cut(good, []byte("\n\n"))
		if !bytes.HasPrefix(n, append(text, "\n\n"...)) {
			t.Fatalf("a cosignature verified over other text: %q", n)
		}
	})
}

// FuzzVerifyCosigned: a cosigned checkpoint (what serve --witness serves,
// what an auditor is handed) never panics the check, and one that passes
// is the exact text the log signed and the witness cosigned, with the
// size and root it states.
func FuzzVerifyCosigned(f *testing.F) {
	l := newTestLog(f, "example.com/fuzz").grow(4, "a")
	w, _ := newTestWitness(f, l)
	cosig, err := w.Add(l.body(0, 4))
	if err != nil {
		f.Fatal(err)
	}
	good := AppendCosignature(l.checkpoint(4), cosig)
	f.Add(good)
	f.Add(l.checkpoint(4))
	f.Add(AppendCosignature(l.checkpoint(3), cosig))
	f.Add(append(append([]byte(nil), good...), good...))
	f.Add([]byte("example.com/fuzz\n4\n\n"))
	f.Fuzz(func(t *testing.T, n []byte) {
		size, root, err := VerifyCosigned(n, l.vkey, w.Key().VKey())
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a multi-line error: %q", err)
			}
			return
		}
		text, _, _ := bytes.Cut(good, []byte("\n\n"))
		if !bytes.HasPrefix(n, append(text, "\n\n"...)) || size != 4 || !bytes.Equal(root, l.tree.HashAt(4)) {
			t.Fatalf("verified other text, or size %d: %q", size, n)
		}
	})
}
