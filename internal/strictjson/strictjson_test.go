package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	var dups []string
	v, err := Parse([]byte(`{"b":1,"a":{"x":[true,null,"s"]},"b":2,"odd key":1.50}`), 8, func(p string) { dups = append(dups, p) })
	if err != nil {
		t.Fatal(err)
	}
	o := v.(*Object)
	if strings.Join(o.Keys, ",") != "b,a,odd key" || o.Vals["b"] != json.Number("1") || strings.Join(dups, ",") != "$.b" {
		t.Fatalf("%+v dups %v", o, dups)
	}
	out, _ := json.Marshal(o)
	if string(out) != `{"b":1,"a":{"x":[true,null,"s"]},"odd key":1.50}` {
		t.Fatalf("re-encoded %s", out)
	}
	if FieldPath("$", "odd key") != `$["odd key"]` || IndexPath("$.a", 3) != "$.a[3]" || TypeName(o) != "an object" {
		t.Fatal("paths")
	}
	for _, bad := range []string{"\xff", `{"a":`, `{} {}`, `[[[[1]]]]`, ``} {
		if _, err := Parse([]byte(bad), 3, nil); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"a":[1,{"b":null}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Parse(b, 32, func(string) {})
		if err != nil {
			return
		}
		out, err := json.Marshal(v)
		if err != nil || !json.Valid(out) {
			t.Fatalf("re-encoding %q: %v", b, err)
		}
	})
}
