package abi

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s to dst as a JSON string, escaped as
// encoding/json escapes it (<, > and & too, and U+2028/U+2029); invalid
// UTF-8 becomes U+FFFD. It is the one JSON string writer of the host's
// hand-written encoders (envelopes, outbound HTTP answers), and skips
// runs of eight plain bytes at a time.
func AppendJSONString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		for i+8 <= len(s) && !stopIn(load8(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// load8 reads s[i:i+8] as a little-endian word.
func load8[T string | []byte](s T, i int) uint64 {
	_ = s[i+7] // one bounds check
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// stopIn reports whether a word of eight string bytes has one that
// AppendJSONString must look at: below 0x20, '"', '\\', '<', '>', '&'
// or not ASCII (SWAR: a zero byte of x^c is a byte equal to c; a false
// alarm only costs the byte-at-a-time path).
func stopIn(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	return x&highs|(x-0x20*ones)&^x&highs|zero(x^'"'*ones)|zero(x^'\\'*ones)|
		zero(x^'<'*ones)|zero(x^'>'*ones)|zero(x^'&'*ones) != 0
}
