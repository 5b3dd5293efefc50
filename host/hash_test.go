package host

import (
	"bytes"
	"testing"
	"time"
)

func TestFormatTimeMatchesLayout(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 21, 10, 33, 35, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 3, 5, 7, 8, 9, 1000, time.FixedZone("x", -7*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
		time.Now(),
	} {
		if got, want := FormatTime(tm), tm.UTC().Format(TimeLayout); got != want {
			t.Errorf("FormatTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

func FuzzFormatTime(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1795000000), int64(123456789))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := FormatTime(tm), tm.UTC().Format(TimeLayout); got != want {
			t.Fatalf("FormatTime(%d, %d) = %q, want %q", sec, nsec, got, want)
		}
	})
}

func TestCompactJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:               `{"a":1}`,
		"{ \"a\" :\n 1 }":       `{"a":1}`,
		`{"h":"<b>&</b>"}`:      `{"h":"\u003cb\u003e\u0026\u003c/b\u003e"}`,
		"{\"s\":\"\u2028\"}":    `{"s":"\u2028"}`,
		`{"a" 1}`:               `{"a" 1}`, // invalid: unchanged
		`{"é":"ü"}`:             `{"é":"ü"}`,
		"[1, 2]":                `[1,2]`,
		`{"g":"Hello, bench!"}`: `{"g":"Hello, bench!"}`,
		`{"q":"a \" b", "c":1}`: `{"q":"a \" b","c":1}`,
		`["\\", 1]`:             `["\\",1]`,
	} {
		if got := string(CompactJSON([]byte(in))); got != want {
			t.Errorf("CompactJSON(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCompactJSON: the fast path never answers differently from
// compacting and escaping.
func FuzzCompactJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, "{ \"a\" : [1, 2] }", `{"s":"a b"}`, `["\\"  ,"x\" y"]`, `"a\`, `"<&>"`, "\"\u2029\"", `{"a"`, `null`} {
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
