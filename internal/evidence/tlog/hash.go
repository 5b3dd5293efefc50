package tlog

import (
	"fmt"

	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of every hash in the log (SHA-256).
const HashSize = 32

// hasher is RFC 6962's: leaves SHA-256(0x00||entry), interior nodes
// SHA-256(0x01||left||right), the empty tree SHA-256("").
var hasher = rfc6962.DefaultHasher

// LeafHash is the leaf hash of one log entry: SHA-256(0x00||entry).
func LeafHash(entry []byte) []byte { return hasher.HashLeaf(entry) }

// NodeHash is the hash of an interior node: SHA-256(0x01||left||right).
func NodeHash(left, right []byte) []byte { return hasher.HashChildren(left, right) }

// EmptyRoot is the root hash of the empty log: SHA-256("").
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// checkHash refuses a hash that is not HashSize bytes, naming it by what.
func checkHash(what string, h []byte) error {
	if len(h) != HashSize {
		return fmt.Errorf("%s is %d bytes, want a %d-byte SHA-256 hash", what, len(h), HashSize)
	}
	return nil
}
