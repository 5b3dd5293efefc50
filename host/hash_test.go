package host

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
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

// testBundle is a small bundle that verifies.
func testBundle() *Bundle {
	a := &Attempt{AttemptID: "att-1", Pack: "local.demo@1.0.0", Node: "demo", Tenant: "default", Attempt: 1, Outcome: abi.Completed,
		Input: json.RawMessage(`{"q":1}`), Output: json.RawMessage(`{"a":2}`), Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`),
		ExitStatus: ExitOK, RetryClass: RetryNone, StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)}
	a.ContentHash = HashAttempt(a)
	e := &Event{Seq: 7, Time: a.EndedAt, Type: EventAttemptRecorded, AttemptID: a.AttemptID, Data: json.RawMessage(`{"content_hash":"` + a.ContentHash + `"}`), PrevHash: strings.Repeat("0", 64)}
	e.Hash = HashEvent(e)
	art := BundleArtifact{Artifact: Artifact{ArtifactID: "art-1", AttemptID: a.AttemptID, Role: RoleOutput, RelativePath: "out.md", SHA256: "d7e9b8d5bc9a3e1f7c0d5a7e4e0d0a3dbd4b0c1f6d55f4c6b0c9bcb2b5a8a8a1"}, Content: []byte("x")}
	sum := sha256.Sum256(art.Content)
	art.SHA256, art.Size = hex.EncodeToString(sum[:]), 1
	return &Bundle{Format: BundleFormat, ExportedAt: a.EndedAt, Attempt: a, Artifacts: []BundleArtifact{art}, Events: []*Event{e}}
}

// FuzzDecodeBundle: a bundle from untrusted bytes (`packrun evidence verify
// --bundle`) is decoded and verified without a panic, with one-line errors
// of bounded size; a bundle that verifies still does after a re-encoding.
func FuzzDecodeBundle(f *testing.F) {
	good, _ := json.Marshal(testBundle())
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"events":[`), []byte(`"events":[null,`), 1))
	f.Add([]byte(`{"format":"x","` + strings.Repeat("z", 3000) + `":1}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		oneLine := func(err error) {
			if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || len(msg) > 1024 {
				t.Fatalf("error of %d bytes or not one line: %.200q", len(msg), msg)
			}
		}
		b, err := DecodeBundle(raw)
		if err != nil {
			oneLine(err)
			return
		}
		if err := VerifyBundle(b); err != nil {
			oneLine(err)
			return
		}
		again, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeBundle(again)
		if err != nil {
			t.Fatalf("re-decoding a verified bundle: %v", err)
		}
		if err := VerifyBundle(back); err != nil {
			t.Fatalf("a verified bundle no longer verifies after a round trip: %v", err)
		}
	})
}

func TestDecodeBundle(t *testing.T) {
	good, _ := json.Marshal(testBundle())
	b, err := DecodeBundle(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyBundle(b); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"null event", string(bytes.Replace(good, []byte(`"events":[`), []byte(`"events":[null,`), 1)), "events[0] is null"},
		{"edited output", string(bytes.Replace(good, []byte(`"output":{"a":2}`), []byte(`"output":{"a":3}`), 1)), "does not match its content"},
		{"unknown field", `{"format":"x","colour":1}`, "unknown field colour"},
		{"long unknown field", `{"format":"x","` + strings.Repeat("z", 3000) + `":1}`, "unknown field " + strings.Repeat("z", 64) + "…"},
		{"not an object", `[1]`, "not a bundle"},
		{"trailing data", string(good) + `{}`, "trailing data"},
	} {
		b, err := DecodeBundle([]byte(tc.raw))
		if err == nil {
			err = VerifyBundle(b)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
