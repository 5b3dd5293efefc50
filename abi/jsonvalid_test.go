package abi

import (
	"encoding/json"
	"strings"
	"testing"
)

var validJSONCases = []string{
	``, ` `, `{}`, `[]`, ` {"a" : [1, -0.5e+3, true, false, null, "x\u00e9\n"]} `, `"\ud83d\ude00"`, `0`, `-0`, `01`, `1.`, `.5`, `1e`,
	`1E+`, `-`, `--1`, `+1`, `tru`, `nul`, `truex`, `[1,]`, `[,1]`, `{"a":}`, `{"a" 1}`, `{a:1}`, `{"a":1,}`, `{,}`, `[}`, `{]`,
	`"a`, "\"a\x01\"", "\"a\x7f\xff\"", `"\x"`, `"\u12"`, `"\u12g4"`, `"\/"`, `[[[]]]`, `[[[]]`, `1 2`, `{"a":1}}`, "\t\r\n1\n",
	`[1e5,2E-3,0.0]`, `{"":""}`, `"\\"`, `"\"`, `[true false]`, `{"a":{"b":[{"c":null}]}}`,
	strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth),
	strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	strings.Repeat("[", maxJSONDepth-1) + "{}" + strings.Repeat("]", maxJSONDepth-1),
	strings.Repeat("[", maxJSONDepth) + "{}" + strings.Repeat("]", maxJSONDepth),
	strings.Repeat(`{"a":`, maxJSONDepth) + "1" + strings.Repeat("}", maxJSONDepth),
	strings.Repeat(`{"a":`, maxJSONDepth+1) + "1" + strings.Repeat("}", maxJSONDepth+1),
}

// ValidJSON (validJSON) accepts exactly what json.Valid accepts, the nesting limit
// included.
func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range validJSONCases {
		if got, want := ValidJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%.60q) = %v, json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validJSONCases {
		if len(s) < 200 {
			f.Add([]byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// An output envelope carrying an http_request answer with a 1 KiB body.
func BenchmarkValidJSON(b *testing.B) {
	out := []byte(`{"outcome":"completed","output":{"s":"00","r":{"status":200,"headers":[["Content-Length","1024"],["Content-Type","text/plain; charset=utf-8"],["Date","Fri, 27 Nov 2026 20:00:00 GMT"]],"body":"` + strings.Repeat("abcdefgh", 128) + `"}}}`)
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			if !json.Valid(out) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(out)))
		for b.Loop() {
			if !validJSON(out) {
				b.Fatal("invalid")
			}
		}
	})
}
