package tlog

import (
	"bytes"
	"context"
	"testing"
)

// FuzzOpenCheckpoint: a note OpenCheckpoint accepts is one the log's key
// signed, and its checkpoint encodes back to the signed body.
func FuzzOpenCheckpoint(f *testing.F) {
	s := testSigner(f, 1)
	l := newTestLog(f, 10)
	f.Add(l.checkpoint(f, 10))
	f.Add(l.checkpoint(f, 0))
	withExt, err := s.Sign(Checkpoint{Origin: origin, Size: 3, Root: LeafHash(nil), Extensions: []string{"a", "b c"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withExt)
	forged, _ := testSigner(f, 2).Sign(Checkpoint{Origin: origin, Size: 3, Root: LeafHash(nil)})
	f.Add(forged)
	f.Add([]byte(origin + "\n1\nAAAA\n\n— x AAAA\n"))
	f.Add([]byte{})
	vkey := s.VerifierKey()
	f.Fuzz(func(t *testing.T, msg []byte) {
		cp, err := OpenCheckpoint(msg, vkey)
		if err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		body, err := cp.Body()
		if err != nil {
			t.Fatalf("accepted a checkpoint that does not encode: %v", err)
		}
		if !bytes.HasPrefix(msg, append(body, '\n')) {
			t.Fatalf("accepted %q whose body is not %q", msg, body)
		}
	})
}

// FuzzDecodeBundle: a bundle CheckEntry accepts proves an entry that is
// in the log at its index (the test log holds entry(i) at index i).
func FuzzDecodeBundle(f *testing.F) {
	l := newTestLog(f, 10)
	for _, ix := range []uint64{0, 3, 9} {
		enc, err := l.bundle(f, ix, 10).Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte(`{"index":1,"leaf_hash":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","proof":[],"checkpoint":""}`))
	f.Add([]byte(`{}`))
	withSince := l.bundle(f, 9, 10)
	withSince.VerifierKey = l.signer.VerifierKey()
	sinceProof, err := ConsistencyProof(context.Background(), l.tiles, 5, 10)
	if err != nil {
		f.Fatal(err)
	}
	withSince.Since = &Since{Checkpoint: string(l.checkpoint(f, 5)), Proof: sinceProof}
	if enc, err := withSince.Encode(); err == nil {
		f.Add(enc)
	}
	vkey := l.signer.VerifierKey()
	saved := l.checkpoint(f, 5)
	f.Fuzz(func(t *testing.T, b []byte) {
		bundle, err := DecodeBundle(b)
		if err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		// The auditor's check: one line, and never a log that did not
		// grow from the saved checkpoint (the test log only grew).
		if cur, old, err := CheckSince(bundle, saved, ""); err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of several lines: %q", err)
			}
		} else if old.Size != 5 || cur.Size < 5 || cur.Size > 10 {
			t.Fatalf("checked sizes %d → %d", old.Size, cur.Size)
		}
		cp, err := CheckEntry(bundle, vkey)
		if err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		leaf := bundle.LeafHash
		if bundle.Entry != nil {
			leaf = LeafHash(bundle.Entry)
		}
		if cp.Size > 10 || bundle.Index >= 10 || !bytes.Equal(leaf, LeafHash(entry(int(bundle.Index)))) {
			t.Fatalf("proved entry %d in size %d that the log does not hold there", bundle.Index, cp.Size)
		}
	})
}

// FuzzDecodeConsistencyBundle: a consistency proof CheckConsistency
// accepts joins two checkpoints of the one log, the older first.
func FuzzDecodeConsistencyBundle(f *testing.F) {
	l := newTestLog(f, 300)
	for _, sz := range [][2]uint64{{0, 300}, {7, 300}, {256, 300}, {299, 300}, {300, 300}} {
		p, err := ConsistencyProof(context.Background(), l.tiles, sz[0], sz[1])
		if err != nil {
			f.Fatal(err)
		}
		enc, err := (&ConsistencyBundle{Old: string(l.checkpoint(f, sz[0])), New: string(l.checkpoint(f, sz[1])), Proof: p}).Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(enc)
	}
	f.Add([]byte(`{"old":"","new":"","proof":null}`))
	vkey := l.signer.VerifierKey()
	f.Fuzz(func(t *testing.T, b []byte) {
		cb, err := DecodeConsistencyBundle(b)
		if err != nil {
			return
		}
		old, cur, err := CheckConsistency([]byte(cb.Old), []byte(cb.New), cb.Proof, vkey)
		if err != nil {
			if bytes.ContainsRune([]byte(err.Error()), '\n') {
				t.Fatalf("error of several lines: %q", err)
			}
			return
		}
		if old.Size > cur.Size || cur.Size > 300 {
			t.Fatalf("accepted sizes %d -> %d", old.Size, cur.Size)
		}
		for _, c := range []*Checkpoint{old, cur} {
			root, err := RootAt(context.Background(), l.tiles, c.Size)
			if err != nil || !bytes.Equal(root, c.Root) {
				t.Fatalf("accepted a checkpoint of size %d the log never had", c.Size)
			}
		}
	})
}
