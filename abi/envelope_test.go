package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"
)

func TestAppendRequestMatchesEncodingJSON(t *testing.T) {
	cases := []Request{
		{ABIVersion: 1, NodeContext: NodeContext{RunID: "r", NodeID: "n", TenantID: "t", Attempt: 1}, Inputs: json.RawMessage(`{"name":"x"}`)},
		{ABIVersion: 1, NodeContext: NodeContext{RunID: "<a&b>\"\\\n\t\x01\b\f", NodeID: "é\u2028\u2029", TenantID: "\xff", Attempt: -3}, Inputs: json.RawMessage(`[1,2]`)},
		{ABIVersion: 1, NodeContext: NodeContext{Configurable: json.RawMessage(`{"a":1}`), Agent: json.RawMessage(`{"agentId":"x"}`)}, Inputs: json.RawMessage(`{}`)},
	}
	for _, c := range cases {
		want, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendRequest(nil, &c); string(got) != string(want) {
			t.Errorf("AppendRequest:\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzAppendRequest(f *testing.F) {
	f.Add("run", "node", "tenant", 1)
	f.Add("\xff\x00<>&\u2028", "\"\\", "", -1)
	f.Fuzz(func(t *testing.T, run, node, tenant string, attempt int) {
		r := Request{ABIVersion: 1, NodeContext: NodeContext{RunID: run, NodeID: node, TenantID: tenant, Attempt: attempt}, Inputs: json.RawMessage(`{}`)}
		want, _ := json.Marshal(&r)
		if got := AppendRequest(nil, &r); string(got) != string(want) {
			t.Fatalf("got %s want %s", got, want)
		}
	})
}

func TestDecodeResponse(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    Outcome
		wantErr error
	}{
		{"completed", `{"outcome":"completed","output":{"a":1}}`, Completed, nil},
		{"completed without output", `{"outcome":"completed"}`, Completed, nil},
		{"suspended", `{"outcome":"suspended","interrupt":{"q":1}}`, Suspended, nil},
		{"failed", `{"outcome":"failed","error":{"code":"x","message":"m"}}`, Failed, nil},
		{"truncated", `{"outcome":"completed","output":`, "", ErrResponseJSON},
		{"empty", ``, "", ErrResponseJSON},
		{"trailing", `{"outcome":"completed"} {}`, "", ErrResponseJSON},
		{"bad utf8", "{\"outcome\":\"completed\",\"output\":\"\xff\"}", "", ErrResponseUTF8},
		{"unknown outcome", `{"outcome":"done"}`, "", ErrResponseEnvelope},
		{"missing outcome", `{"output":1}`, "", ErrResponseEnvelope},
		{"suspended without interrupt", `{"outcome":"suspended"}`, "", ErrResponseEnvelope},
		{"failed without code", `{"outcome":"failed","error":{}}`, "", ErrResponseEnvelope},
		{"wrong type", `{"outcome":7}`, "", ErrResponseEnvelope},
		{"unknown field", `{"outcome":"completed","extra":1}`, "", ErrResponseEnvelope},
		{"not an object", `[1]`, "", ErrResponseEnvelope},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := DecodeResponse([]byte(c.in))
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if r.Outcome != c.want {
				t.Fatalf("outcome = %q, want %q", r.Outcome, c.want)
			}
		})
	}
}

func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{`{"outcome":"completed","output":{}}`, `{"outcome":"failed","error":{"code":"c"}}`, `{"outcome":"suspended","interrupt":1}`, "\xff", `{`,
		`{"outcome":"completed","taskOutcome":{"operator_summary":"s","file_changes":["a/b"],"follow_up_tasks":[{}],"external_messages":[{}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeResponse(b)
		if err != nil {
			if !errors.Is(err, ErrResponseUTF8) && !errors.Is(err, ErrResponseJSON) && !errors.Is(err, ErrResponseEnvelope) && !errors.Is(err, ErrResponseTaskOutcome) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch r.Outcome {
		case Completed, Suspended, Failed:
		default:
			t.Fatalf("accepted outcome %q", r.Outcome)
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
	})
}

func TestPtrLenRoundTrip(t *testing.T) {
	for _, c := range [][2]uint32{{0, 0}, {1, 2}, {0xffffffff, 0x7fffffff}, {1024, 0xffffffff}} {
		p, l := UnpackPtrLen(PackPtrLen(c[0], c[1]))
		if p != c[0] || l != c[1] {
			t.Errorf("round trip %v -> %d,%d", c, p, l)
		}
	}
}

func TestSignatures(t *testing.T) {
	f, ok := Lookup(Exports(), ExportNodeInvoke)
	if !ok || f.Signature() != "(i32 i32 i32) -> (i32 i32) or (i64)" {
		t.Fatalf("node_invoke signature %q", f.Signature())
	}
	if !Serves(1) || Serves(999) {
		t.Fatal("Serves")
	}
}

// message_publish is ABI 1.2: a pack declaring 1.1 may not import it.
func TestMessagePublishIsMinor2(t *testing.T) {
	f, ok := Lookup(HostV1Imports(), HostMessagePublish)
	if !ok || f.Signature() != "(i32 i32 i32) -> (i32)" || f.Minor != 2 {
		t.Fatalf("message_publish: %+v %v", f, ok)
	}
	for v, want := range map[Version]bool{{Major: 1, Minor: 2}: true, {Major: 1, Minor: 1}: false, {Major: 1}: false, {}: true} {
		if f.Allowed(v) != want {
			t.Errorf("Allowed(%v) = %v, want %v", v, !want, want)
		}
	}
}

// referenceDecode is the straightforward encoding/json decoding of an
// envelope; DecodeResponse must never accept what it refuses, and must agree
// with it on everything it accepts. (DecodeResponse is stricter about keys:
// it matches them exactly, where encoding/json folds case and unescapes.)
func referenceDecode(b []byte) (Response, error) {
	var r Response
	if !utf8.Valid(b) {
		return r, ErrResponseUTF8
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Response{}, err
	}
	if dec.More() {
		return Response{}, errors.New("trailing data")
	}
	if err := r.validate(); err != nil {
		return Response{}, err
	}
	return r, nil
}

func FuzzDecodeResponseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{`{"outcome":"completed","output":{"a":[1,"}"]}}`, ` { "outcome" : "failed" , "error" : {"code":"c","details":{"x":null}} } `,
		`{"outcome":"suspended","interrupt":"\"q\""}`, `{"outcome":"completed","output":1e5,"output":null}`, `{"OUTCOME":"completed"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeResponse(b)
		want, refErr := referenceDecode(b)
		if err != nil {
			return // stricter is allowed
		}
		if refErr != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", b, refErr)
		}
		if got.Outcome != want.Outcome || !jsonEqual(got.Output, want.Output) || !jsonEqual(got.Interrupt, want.Interrupt) ||
			(got.Error == nil) != (want.Error == nil) || (got.Error != nil && (got.Error.Code != want.Error.Code || got.Error.Message != want.Error.Message)) {
			t.Fatalf("%q: got %+v, encoding/json gives %+v", b, got, want)
		}
	})
}

func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

func BenchmarkDecodeResponse(b *testing.B) {
	resp := []byte(`{"outcome":"completed","output":{"greeting":"Hello, xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx!"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeResponse(resp); err != nil {
			b.Fatal(err)
		}
	}
}

// http_request is ABI 1.3: the host serves 1.3, and a pack declaring 1.2
// may not import it.
func TestHTTPRequestIsMinor3(t *testing.T) {
	if Newest() != (Version{Major: 1, Minor: 3}) || ServedList() != "1.3" || ServedMajorsList() != "1 (packrun:host/v1 up to 1.3)" {
		t.Fatalf("served %v %q %q", Newest(), ServedList(), ServedMajorsList())
	}
	f, ok := Lookup(HostV1Imports(), HostHTTPRequest)
	if !ok || f.Signature() != "(i32 i32 i32) -> (i32)" || f.Minor != 3 {
		t.Fatalf("http_request: %+v %v", f, ok)
	}
	for v, want := range map[Version]bool{{Major: 1, Minor: 3}: true, {Major: 1, Minor: 2}: false, {}: true} {
		if f.Allowed(v) != want {
			t.Errorf("Allowed(%v) = %v, want %v", v, !want, want)
		}
	}
}
