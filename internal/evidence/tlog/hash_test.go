package tlog

import (
	"bytes"
	"testing"
)

// checkHashes fails t unless LeafHash and NodeHash are RFC 6962's (the
// hasher's) for these bytes.
func checkHashes(t *testing.T, a, b []byte) {
	t.Helper()
	if got, want := LeafHash(a), hasher.HashLeaf(a); !bytes.Equal(got, want) {
		t.Fatalf("LeafHash(%x) = %x, RFC 6962: %x", a, got, want)
	}
	if got, want := NodeHash(a, b), hasher.HashChildren(a, b); !bytes.Equal(got, want) {
		t.Fatalf("NodeHash(%x, %x) = %x, RFC 6962: %x", a, b, got, want)
	}
}

// TestHashesAsRFC6962: the hashes computed from the stack are the
// hasher's, at every entry size up to past the stack buffer.
func TestHashesAsRFC6962(t *testing.T) {
	buf := make([]byte, 3*HashSize)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for n := 0; n <= len(buf); n++ {
		checkHashes(t, buf[:n], buf[len(buf)-n:])
	}
	h := LeafHash([]byte("x"))
	checkHashes(t, h, LeafHash(h))
}

func FuzzHashesAsRFC6962(f *testing.F) {
	f.Add([]byte(""), []byte(""))
	f.Add(bytes.Repeat([]byte{1}, HashSize), bytes.Repeat([]byte{2}, HashSize))
	f.Add(bytes.Repeat([]byte{3}, 2*HashSize+1), []byte("r"))
	f.Fuzz(func(t *testing.T, a, b []byte) { checkHashes(t, a, b) })
}

// BenchmarkLeafHash: a chain entry's leaf hash and one interior node,
// against the RFC 6962 hasher's.
func BenchmarkLeafHash(b *testing.B) {
	e := bytes.Repeat([]byte{7}, HashSize)
	for _, c := range []struct {
		name string
		leaf func([]byte) []byte
		node func(l, r []byte) []byte
	}{{"stack", LeafHash, NodeHash}, {"rfc6962", hasher.HashLeaf, hasher.HashChildren}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.node(c.leaf(e), e)
			}
		})
	}
}
