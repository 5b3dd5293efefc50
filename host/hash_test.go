package host

import (
	"bytes"
	"testing"
)

func TestCompactJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:            `{"a":1}`,
		"{ \"a\" :\n 1 }":    `{"a":1}`,
		`{"h":"<b>&</b>"}`:   `{"h":"\u003cb\u003e\u0026\u003c/b\u003e"}`,
		"{\"s\":\"\u2028\"}": `{"s":"\u2028"}`,
		`{"a" 1}`:            `{"a" 1}`, // invalid: unchanged
		`{"é":"ü"}`:          `{"é":"ü"}`,
		"[1, 2]":             `[1,2]`,
	} {
		if got := string(CompactJSON([]byte(in))); got != want {
			t.Errorf("CompactJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCompactJSON: the fast path never answers differently from
// compacting and escaping.
func FuzzCompactJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "{ \"a\" : [1, 2] }", `"<&>"`, "\"\u2029\"", `{"a"`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) == 0 {
			return
		}
		if got, want := CompactJSON(raw), compactSlow(raw); !bytes.Equal(got, want) {
			t.Fatalf("CompactJSON(%q) = %q, want %q", raw, got, want)
		}
	})
}
