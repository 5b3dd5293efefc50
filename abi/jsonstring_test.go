package abi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendJSONString: the one JSON string writer gives, byte for byte,
// what encoding/json gives, from a string and from bytes alike (the
// eight-byte fast path included: seeds put every escaped byte at each
// offset of a word).
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "a \"q\" \\ <&> \t\n\r\b\f\x00\x1f\x7f", "é 😀 \u2028 \u2029",
		"\xff\xfe bad \xc3", "0123456<89abcde&0123456>", "01234567\"01234567\\0123456\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("string %q: %s, encoding/json %s", s, got, want)
		}
		if got := AppendJSONString([]byte("x"), []byte(s)); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("bytes %q: %s, encoding/json %s", s, got, want)
		}
	})
}
