package abi

import "encoding/binary"

// validJSON reports whether b is one JSON value (RFC 8259) with optional
// white space around it: exactly what encoding/json.Valid accepts, at most
// maxJSONDepth nested arrays and objects, bytes of 0x80 and above taken as
// they are (the caller checks UTF-8). It is on every invocation's path (a
// node's output envelope), where json.Valid's general scanner costs ≈ 5–10
// ns a byte; this one walks string contents, the bulk of most outputs, a
// byte at a time through a table. FuzzValidJSON checks it against
// json.Valid.
// ValidJSON reports whether b is one JSON value: exactly what
// encoding/json.Valid accepts (see validJSON), at a fraction of its cost on
// long strings. The runtime checks every host call's request with it.
func ValidJSON(b []byte) bool { return validJSON(b) }

func validJSON(b []byte) bool {
	var buf [64]byte
	stack := buf[:0] // '{' or '[' per open container
	i := skipSpace(b, 0)
	for {
		// A value starts at i.
		if i >= len(b) {
			return false
		}
		switch c := b[i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return false
			}
			end := byte('}')
			if c == '[' {
				end = ']'
			}
			i = skipSpace(b, i+1)
			if i < len(b) && b[i] == end {
				i++
				break // an empty container is a whole value
			}
			stack = append(stack, c)
			if c == '{' {
				if i = objectKey(b, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = scanJSONString(b, i)
		case 't':
			i = literal(b, i, "true")
		case 'f':
			i = literal(b, i, "false")
		case 'n':
			i = literal(b, i, "null")
		default:
			i = scanJSONNumber(b, i)
		}
		if i < 0 {
			return false
		}
		// After a value: close containers, or go on after a comma.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				return i == len(b)
			}
			if i >= len(b) {
				return false
			}
			top := stack[len(stack)-1]
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top == '{' {
					if i = objectKey(b, i); i < 0 {
						return false
					}
				}
				break
			}
			if (top == '{' && b[i] == '}') || (top == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

// objectKey reads `"key" :` at i and returns the index of the value after
// it (white space skipped), or -1.
func objectKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanJSONString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// plainString marks the bytes a JSON string holds as they are: not a
// control character, '"' or '\\'.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// specialIn reports whether a word of eight string bytes has one below
// 0x20, a '"' or a '\\' (SWAR: a zero byte of x^c is a byte equal to c).
func specialIn(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	return (x-0x20*ones)&^x&highs|zero(x^'"'*ones)|zero(x^'\\'*ones) != 0
}

// scanJSONString returns the index past the string starting at b[i] ('"'),
// or -1.
func scanJSONString(b []byte, i int) int {
	i++
	for {
		// Eight bytes at a time while none of them ends the run of plain
		// bytes (a control character, '"' or '\\'), then one at a time.
		for i+8 <= len(b) && !specialIn(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainString[b[i]] {
			i++
		}
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return -1
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return -1
					}
				}
				i += 6
			default:
				return -1
			}
		default: // a control character
			return -1
		}
	}
}

// scanJSONNumber returns the index past the number starting at b[i], or -1:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanJSONNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
