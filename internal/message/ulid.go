package message

import (
	"encoding/hex"
	"strings"
)

// crockford is the ULID alphabet (Crockford's base 32).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// ulidUUID writes the 128 bits of a ULID as a UUID's text form; false if
// id is not a ULID (26 characters of the alphabet, first at most 7).
func ulidUUID(id string) (string, bool) {
	if len(id) != 26 || id[0] > '7' {
		return "", false
	}
	var b [16]byte
	var acc uint32
	bits, n := 0, 0
	// The first character carries 3 bits, every other 5: 3 + 25*5 = 128.
	for i := 0; i < 26; i++ {
		v := strings.IndexByte(crockford, id[i])
		if v < 0 {
			return "", false
		}
		w := 5
		if i == 0 {
			w = 3
		}
		acc = acc<<w | uint32(v)
		bits += w
		for bits >= 8 {
			bits -= 8
			b[n] = byte(acc >> bits)
			n++
		}
	}
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], true
}

// uuidBytes reads a UUID's text form (any version, hex in either case).
func uuidBytes(u string) ([16]byte, bool) {
	var b [16]byte
	if len(u) != 36 || u[8] != '-' || u[13] != '-' || u[18] != '-' || u[23] != '-' {
		return b, false
	}
	raw, err := hex.DecodeString(u[0:8] + u[9:13] + u[14:18] + u[19:23] + u[24:])
	if err != nil {
		return b, false
	}
	copy(b[:], raw)
	return b, true
}

// ulidOf writes 128 bits as a ULID (the first character carries 3 bits).
func ulidOf(b [16]byte) string {
	var out [26]byte
	// 128 bits, most significant first: 3 bits, then 25 groups of 5.
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 | uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	for i := 25; i >= 0; i-- {
		w := uint(5)
		if i == 0 {
			w = 3
		}
		out[i] = crockford[lo&(1<<w-1)]
		lo = lo>>w | hi<<(64-w)
		hi >>= w
	}
	return string(out[:])
}
