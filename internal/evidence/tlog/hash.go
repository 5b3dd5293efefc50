package tlog

import (
	"crypto/sha256"
	"fmt"

	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of every hash in the log (SHA-256).
const HashSize = 32

// hasher is RFC 6962's: leaves SHA-256(0x00||entry), interior nodes
// SHA-256(0x01||left||right), the empty tree SHA-256("").
var hasher = rfc6962.DefaultHasher

// LeafHash is the leaf hash of one log entry: SHA-256(0x00||entry).
// An entry of up to 64 bytes (a chain entry is 32) is hashed from the
// stack: one allocation, the result, where the hasher's digest makes
// three; the sequencer hashes every entry inside the store's write.
func LeafHash(entry []byte) []byte {
	if len(entry) > 2*HashSize {
		return hasher.HashLeaf(entry)
	}
	var buf [1 + 2*HashSize]byte
	buf[0] = rfc6962.RFC6962LeafHashPrefix
	n := copy(buf[1:], entry)
	h := sha256.Sum256(buf[:1+n])
	return h[:]
}

// NodeHash is the hash of an interior node: SHA-256(0x01||left||right),
// from the stack as LeafHash when both are hashes.
func NodeHash(left, right []byte) []byte {
	if len(left) != HashSize || len(right) != HashSize {
		return hasher.HashChildren(left, right)
	}
	var buf [1 + 2*HashSize]byte
	buf[0] = rfc6962.RFC6962NodeHashPrefix
	copy(buf[1:], left)
	copy(buf[1+HashSize:], right)
	h := sha256.Sum256(buf[:])
	return h[:]
}

// EmptyRoot is the root hash of the empty log: SHA-256("").
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// checkHash refuses a hash that is not HashSize bytes, naming it by what.
func checkHash(what string, h []byte) error {
	if len(h) != HashSize {
		return fmt.Errorf("%s is %d bytes, want a %d-byte SHA-256 hash", what, len(h), HashSize)
	}
	return nil
}
