package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

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
func testBundle() *host.Bundle {
	a := &host.Attempt{AttemptID: "att-1", Pack: "local.demo@1.0.0", Node: "demo", Tenant: "default", Attempt: 1, Outcome: abi.Completed,
		Input: json.RawMessage(`{"q":1}`), Output: json.RawMessage(`{"a":2}`), Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`),
		ExitStatus: host.ExitOK, RetryClass: host.RetryNone, StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)}
	a.ContentHash = HashAttempt(a)
	e := &host.Event{Seq: 7, Time: a.EndedAt, Type: host.EventAttemptRecorded, AttemptID: a.AttemptID, Data: json.RawMessage(`{"content_hash":"` + a.ContentHash + `"}`), PrevHash: strings.Repeat("0", 64)}
	e.Hash = HashEvent(e)
	art := host.BundleArtifact{Artifact: host.Artifact{ArtifactID: "art-1", AttemptID: a.AttemptID, Role: host.RoleOutput, RelativePath: "out.md", SHA256: "d7e9b8d5bc9a3e1f7c0d5a7e4e0d0a3dbd4b0c1f6d55f4c6b0c9bcb2b5a8a8a1"}, Content: []byte("x")}
	sum := sha256.Sum256(art.Content)
	art.SHA256, art.Size = hex.EncodeToString(sum[:]), 1
	return &host.Bundle{Format: host.BundleFormat, ExportedAt: a.EndedAt, Attempt: a, Artifacts: []host.BundleArtifact{art}, Events: []*host.Event{e}}
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

// The canonical encodings are a storage format: existing chains must keep
// verifying, so these hashes may never change.
func TestCanonicalHashesAreStable(t *testing.T) {
	tm := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	e := &host.Event{Seq: 7, Time: tm, Type: "task_claimed", TaskID: "t1", Data: json.RawMessage(`{ "a" : "<b>" }`), PrevHash: GenesisHash}
	a := &host.Attempt{AttemptID: "a1", Attempt: 2, Input: json.RawMessage(`{"x": 1}`), Outcome: abi.Failed,
		Error: &abi.Error{Code: "c", Message: "m"}, Stdout: []byte{0, 1}, StartedAt: tm, EndedAt: tm}
	got := fmt.Sprintf("%s %s %s %s", HashEvent(e), HashAttemptV1(a), HashAttempt(a), LinkAttempt(7, GenesisHash, HashAttempt(a)))
	const want = "392085ab10007ec2c003e8d2b50086e5b92f6d1d99141bf46cc45ed9efc41840 7da160ed3acfd9310f60bafd6bc9b8b322b68a3a339d956da62429f0a692b7cf" +
		" 11bc21584b42fab495fc5fdcab951ad720984636ccbf2e001c10be4df6fe3637 dd3183961896babc6a4671aa3abe9fb3793aec854fd7ea640d11162820db346b"
	if got != want {
		t.Fatalf("canonical hashes changed:\n got %s\nwant %s", got, want)
	}
	// Equivalent encodings hash the same; any field change does not.
	e2 := *e
	e2.Data = json.RawMessage(`{"a":"\u003cb\u003e"}`)
	e2.Time = tm.UTC()
	if HashEvent(&e2) != HashEvent(e) {
		t.Fatal("compaction or time zone changed the event hash")
	}
	for _, edit := range []func(*host.Event){
		func(e *host.Event) { e.Seq++ }, func(e *host.Event) { e.Time = e.Time.Add(1) }, func(e *host.Event) { e.Type = "x" },
		func(e *host.Event) { e.TaskID = "" }, func(e *host.Event) { e.AttemptID = "t1" }, func(e *host.Event) { e.Data = []byte(`{"a":"b"}`) },
		func(e *host.Event) { e.PrevHash = "" },
		// Moving bytes between fields must change the hash too.
		func(e *host.Event) { e.Type, e.TaskID = "task_claimedt", "1" },
	} {
		c := *e
		edit(&c)
		if HashEvent(&c) == HashEvent(e) {
			t.Fatalf("edit not reflected: %+v", c)
		}
	}
	b := *a
	b.Error = nil
	if HashAttempt(&b) == HashAttempt(a) {
		t.Fatal("error presence not hashed")
	}
	b = *a
	b.Stdout, b.Stderr = nil, []byte{0, 1}
	if HashAttempt(&b) == HashAttempt(a) {
		t.Fatal("stdout/stderr not distinguished")
	}
}
