package dispatch

import (
	"encoding/json"
	"strconv"
)

// decodeMemReq decodes a memory call's request as json.Unmarshal into a
// memReq would, which is what it falls back to for anything it does not
// handle itself: a key other than the six, a string with an escape, a
// number that is not a plain integer, a value of the wrong type. The fast
// path exists because guests call memory_get in loops and reflection-based
// decoding cost more than the cached read it leads to. req must be valid
// JSON (the runtime checks it before calling services); r.Value aliases req.
func decodeMemReq(req []byte) (r memReq, ok bool) {
	if fast, ok := decodeMemReqFast(req); ok {
		return fast, true
	}
	r = memReq{}
	return r, json.Unmarshal(req, &r) == nil
}

func decodeMemReqFast(b []byte) (r memReq, ok bool) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return r, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return r, skipWS(b, i+1) == len(b)
	}
	for {
		key, next, ok := plainString(b, i)
		if !ok {
			return r, false
		}
		i = skipWS(b, next)
		if i >= len(b) || b[i] != ':' {
			return r, false
		}
		i = skipWS(b, i+1)
		end := valueEnd(b, i)
		if end < 0 {
			return r, false
		}
		val := b[i:end]
		switch key {
		case "namespace", "key", "prefix":
			if string(val) == "null" {
				break // json.Unmarshal leaves the field as it is
			}
			s, next, ok := plainString(b, i)
			if !ok || next != end {
				return r, false
			}
			switch key {
			case "namespace":
				r.Namespace = s
			case "key":
				r.Key = s
			default:
				r.Prefix = s
			}
		case "value":
			r.Value = val
		case "ttlSeconds":
			if string(val) == "null" {
				break // json.Unmarshal leaves the field as it is
			}
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil {
				return r, false
			}
			r.TTLSeconds = n
		case "secret":
			switch string(val) {
			case "true":
				r.Secret = true
			case "false":
				r.Secret = false
			case "null":
			default:
				return r, false
			}
		default:
			return r, false
		}
		i = skipWS(b, end)
		if i >= len(b) {
			return r, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			return r, skipWS(b, i+1) == len(b)
		default:
			return r, false
		}
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] that has no escapes (and, so
// that its bytes are exactly what json.Unmarshal would produce, no invalid
// UTF-8, which the caller has ruled out) and returns it and the index after
// its closing quote.
func plainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return string(b[i+1 : j]), j + 1, true
		case c == '\\' || c < 0x20:
			return "", 0, false
		}
	}
	return "", 0, false
}

// valueEnd returns the index just after the JSON value starting at b[i],
// or -1. b is known to be valid JSON, so only strings (which may hold
// brackets) and nesting need following.
func valueEnd(b []byte, i int) int {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			j++
			for j < len(b) && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(b) {
				return -1
			}
			if depth == 0 {
				return j + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case ',':
			if depth == 0 {
				return j
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return j
			}
		}
	}
	if depth == 0 {
		return len(b)
	}
	return -1
}
