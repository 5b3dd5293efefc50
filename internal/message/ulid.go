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
