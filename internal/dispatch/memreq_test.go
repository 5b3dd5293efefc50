package dispatch

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

var memReqSeeds = []string{
	`{"namespace":"ns","key":"k"}`,
	` { "namespace" : "ns" , "key" : "k" } `,
	`{"namespace":"ns","key":"k","value":{"a":[1,2,{"b":"}"}]},"ttlSeconds":60,"secret":true}`,
	`{"namespace":"ns","prefix":"a/"}`,
	`{"namespace":"n\u0073","key":"k"}`,
	`{"Namespace":"ns","key":"k"}`,
	`{"namespace":"ns","key":"k","extra":[1]}`,
	`{"namespace":"ns","namespace":null,"key":"k"}`,
	`{"namespace":5}`,
	`{"namespace":"ns","ttlSeconds":1.5}`,
	`{"namespace":"ns","ttlSeconds":-0,"secret":null,"value":null}`,
	`{"namespace":"ns","value":"x\"y"}`,
	`{}`, `null`, `[]`, `"x"`, `{"namespace":"é","key":"日本"}`,
}

func TestDecodeMemReq(t *testing.T) {
	for _, s := range memReqSeeds {
		checkMemReq(t, []byte(s))
	}
	r, ok := decodeMemReqFast([]byte(`{"namespace":"ns","key":"k","value":[1, 2],"ttlSeconds":60,"secret":true}`))
	if !ok || r.Namespace != "ns" || r.Key != "k" || string(r.Value) != `[1, 2]` || r.TTLSeconds != 60 || !r.Secret {
		t.Fatalf("fast path: %v %+v", ok, r)
	}
}

// checkMemReq: decodeMemReq answers exactly as json.Unmarshal does.
func checkMemReq(t *testing.T, req []byte) {
	t.Helper()
	var want memReq
	wantOK := json.Unmarshal(req, &want) == nil
	got, ok := decodeMemReq(req)
	if ok != wantOK || ok && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeMemReq(%s) = %+v, %v; json.Unmarshal: %+v, %v", req, got, ok, want, wantOK)
	}
}

func FuzzDecodeMemReq(f *testing.F) {
	for _, s := range memReqSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		// The runtime hands services only valid UTF-8 JSON.
		if !utf8.Valid(req) || !json.Valid(req) {
			return
		}
		checkMemReq(t, req)
	})
}
