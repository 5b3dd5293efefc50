package strictjson

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheck(t *testing.T) {
	manyKeys := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{"p":{`)
		for i := range 40 {
			b.WriteString(`"k` + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + `":1,`)
		}
		b.WriteString(extra + `}}`)
		return b.String()
	}
	for _, tc := range []struct {
		name, doc string
		kind      error  // nil: accepted
		path      string // of the problem
	}{
		{"object", `{"a":1,"b":[true,false,null,"s",-1.5e+3,0,{}],"c":{"d":[]}}`, nil, ""},
		{"whitespace", " \t\r\n{ \"a\" : [ 1 , 2 ] } \n", nil, ""},
		{"scalar", `"x"`, nil, ""},
		{"escapes", `{"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00":"\u0000"}`, nil, ""},
		{"utf-8", `{"é":"日本語 😀"}`, nil, ""},
		{"same key in two objects", `{"a":{"a":1},"b":{"a":2}}`, nil, ""},
		{"40 keys", manyKeys(`"z":1`), nil, ""},

		{"duplicate", `{"a":1,"b":2,"a":3}`, ErrDuplicateKey, "$.a"},
		{"nested duplicate", `{"p":{"x":[{"k":1,"k":2}]}}`, ErrDuplicateKey, "$.p.x[0].k"},
		{"duplicate by escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey, "$.a"},
		{"escaped duplicate", `{"\u00e9":1,"é":2}`, ErrDuplicateKey, `$["é"]`},
		{"duplicate among many", manyKeys(`"ka":2`), ErrDuplicateKey, "$.p.ka"},
		{"escaped duplicate among many", manyKeys(`"k\u0062":2`), ErrDuplicateKey, "$.p.kb"},
		{"case differs: not a duplicate", `{"a":1,"A":2}`, nil, ""},

		{"bad UTF-8 in a value", "{\"p\":{\"n\":\"a\xffb\"}}", ErrInvalidUTF8, "$.p.n"},
		{"bad UTF-8 in a key", "{\"p\":{\"a\":1,\"n\xff\":1}}", ErrInvalidUTF8, "$.p"},
		{"bad UTF-8 in an array", "[1,\"\xc3\"]", ErrInvalidUTF8, "$[1]"},
		{"bad UTF-8 outside strings", "{\"a\":\xff}", ErrInvalidUTF8, "$.a"},
		{"surrogate half", "\"\xed\xa0\x80\"", ErrInvalidUTF8, "$"},
		{"overlong", "\"\xc0\xaf\"", ErrInvalidUTF8, "$"},
		{"lone high surrogate", `{"a":"\ud800"}`, ErrInvalidUTF8, "$.a"},
		{"lone low surrogate", `{"a":"\udc00x"}`, ErrInvalidUTF8, "$.a"},
		{"high then not low", `["\ud800\u0041"]`, ErrInvalidUTF8, "$[0]"},

		{"empty", ``, ErrSyntax, "$"},
		{"unclosed", `{"a":[1,2`, ErrSyntax, "$.a[1]"},
		{"trailing comma", `{"a":1,}`, ErrSyntax, "$"},
		{"missing colon", `{"a" 1}`, ErrSyntax, "$.a"},
		{"trailing data", `{} {}`, ErrSyntax, "$"},
		{"leading zero", `[01]`, ErrSyntax, "$[0]"},
		{"bare minus", `[-]`, ErrSyntax, "$[0]"},
		{"no fraction digits", `1.`, ErrSyntax, "$"},
		{"no exponent digits", `1e+`, ErrSyntax, "$"},
		{"bad literal", `[tru]`, ErrSyntax, "$[0]"},
		{"control character", "\"a\nb\"", ErrSyntax, "$"},
		{"bad escape", `"\x"`, ErrSyntax, "$"},
		{"short unicode escape", `"\u12"`, ErrSyntax, "$"},
		{"single quotes", `{'a':1}`, ErrSyntax, "$"},
		{"BOM", "\ufeff{}", ErrSyntax, "$"},
		{"key not a string", `{1:2}`, ErrSyntax, "$"},

		{"deep", strings.Repeat("[", 9) + strings.Repeat("]", 9), ErrTooDeep, "$[0][0][0][0][0][0][0][0]"},
		{"deep enough", strings.Repeat("[", 8) + strings.Repeat("]", 8), nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), 8)
			if tc.kind == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !json.Valid([]byte(tc.doc)) {
					t.Fatal("encoding/json refuses it")
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) || !errors.Is(err, tc.kind) {
				t.Fatalf("error %v, want %v", err, tc.kind)
			}
			if ce.Path != tc.path {
				t.Fatalf("path %q, want %q (%v)", ce.Path, tc.path, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("not one line: %q", err)
			}
		})
	}
}

// TestCheckBounded: an error on a huge key or a deep path stays short.
func TestCheckBounded(t *testing.T) {
	long := strings.Repeat("k", 10000)
	deep := strings.Repeat(`{"`+long+`":`, 50) + "x"
	for _, doc := range []string{
		`{"` + long + `":1,"` + long + `":2}`,
		deep,
		strings.Repeat(`[`, 5000) + "\xff",
	} {
		err := Check([]byte(doc), 10000)
		if err == nil || len(err.Error()) > 400 {
			t.Fatalf("%d-byte error: %.100v", len(err.Error()), err)
		}
	}
}

// TestCheckAllocs: checking a usual document allocates nothing per key
// or per level (at most the pooled checker, when the pool was emptied).
func TestCheckAllocs(t *testing.T) {
	doc := []byte(`{"task_type":"hello.wat","source":"t","priority":2,"payload":{"name":"x","list":[1,2,{"a":null}],"s":"\u00e9\n"}}`)
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(doc, 64); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Fatalf("%v allocations per check", n)
	}
}

var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F][0-9a-fA-F]{2}`)

// FuzzCheck: Check accepts only what encoding/json accepts, and exactly
// the documents that are valid UTF-8 with no duplicate key (as Parse sees
// them) and no unpaired surrogate; its errors are one bounded line.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,{"b":null}],"c":"\u00e9"}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, "{\"a\":\"\xff\"}",
		`["\ud800"]`, `["\ud83d\ude00"]`, `[-0.5e-7,true,false]`, `{"a" 1}`, `[[[[[[]]]]]]`, ` "x" `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, 1<<20)
		if err == nil {
			if !json.Valid(b) {
				t.Fatalf("accepted %q, which encoding/json refuses", b)
			}
			dups := 0
			if _, perr := Parse(b, 1<<20, func(string) { dups++ }); perr != nil || dups > 0 || !utf8.Valid(b) {
				t.Fatalf("accepted %q: Parse %v, %d duplicates", b, perr, dups)
			}
			if shallow := Check(b, 4); shallow != nil && !errors.Is(shallow, ErrTooDeep) {
				t.Fatalf("depth limit changed the answer for %q: %v", b, shallow)
			}
			return
		}
		var ce *CheckError
		if !errors.As(err, &ce) {
			t.Fatalf("%T: %v", err, err)
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || len(msg) > 600 || !utf8.ValidString(msg) {
			t.Fatalf("error is not one bounded line: %q", msg)
		}
		switch {
		case errors.Is(err, ErrSyntax):
			if json.Valid(b) {
				t.Fatalf("refused %q as a syntax error, which encoding/json accepts: %v", b, err)
			}
		case errors.Is(err, ErrDuplicateKey):
			// Parse refuses invalid UTF-8 anywhere before it looks for
			// duplicates; Check reports whichever comes first.
			dups := 0
			_, perr := Parse(b, 1<<20, func(string) { dups++ })
			if json.Valid(b) && dups == 0 && (perr == nil || utf8.Valid(b)) {
				t.Fatalf("refused %q for a duplicate Parse does not see: %v", b, err)
			}
		case errors.Is(err, ErrInvalidUTF8):
			if utf8.Valid(b) && !surrogateEscape.Match(b) {
				t.Fatalf("refused valid UTF-8 %q: %v", b, err)
			}
		default:
			t.Fatalf("refused %q: %v", b, err)
		}
	})
}

// BenchmarkCheck: Check against json.Valid (the floor: syntax only), Parse
// (Decoder.Token, building values) and the json.Unmarshal into a
// RawMessage that the API ran on every body before.
func BenchmarkCheck(b *testing.B) {
	small := []byte(`{"task_type":"hello.wat","source":"load","subject":"n1","priority":2,"payload":{"name":"Ada","i":1}}`)
	var big strings.Builder
	big.WriteString(`{"task_type":"hello.wat","payload":{"rows":[`)
	for i := range 2000 {
		if i > 0 {
			big.WriteByte(',')
		}
		big.WriteString(`{"id":12345,"name":"row name é","tags":["a","b"],"ok":true,"v":-1.25e3}`)
	}
	big.WriteString(`]}}`)
	for _, doc := range []struct {
		name string
		b    []byte
	}{{"intent", small}, {"150KB", []byte(big.String())}} {
		b.Run(doc.name+"/Check", func(b *testing.B) {
			b.SetBytes(int64(len(doc.b)))
			for b.Loop() {
				if err := Check(doc.b, 10000); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(doc.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(doc.b)))
			for b.Loop() {
				json.Valid(doc.b)
			}
		})
		b.Run(doc.name+"/Parse", func(b *testing.B) {
			b.SetBytes(int64(len(doc.b)))
			for b.Loop() {
				Parse(doc.b, 10000, func(string) {})
			}
		})
		b.Run(doc.name+"/json.Unmarshal-RawMessage", func(b *testing.B) {
			b.SetBytes(int64(len(doc.b)))
			for b.Loop() {
				var m json.RawMessage
				json.Unmarshal(doc.b, &m)
			}
		})
	}
}
