package evidence

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

func newAbiError(code, msg, details string) *abi.Error {
	return &abi.Error{Code: code, Message: msg, Details: json.RawMessage(details)}
}

func TestRedactor(t *testing.T) {
	r := NewRedactor()
	r.Add("creds/token", json.RawMessage(`"sk-live-abc123"`))
	r.Add("creds/db", json.RawMessage(`{"user":"admin","password":"hunter2-\"quoted\"","port":5432,"pin":1234,"x":"ab"}`))
	r.Add("creds/long", json.RawMessage(`"sk-live-abc123-and-more"`))

	text := []struct {
		name, in, want string
	}{
		{"plain", "token is sk-live-abc123.", "token is [REDACTED:creds/token]."},
		{"twice", "sk-live-abc123sk-live-abc123", "[REDACTED:creds/token][REDACTED:creds/token]"},
		{"longest first", "x sk-live-abc123-and-more y", "x [REDACTED:creds/long] y"},
		{"object leaf", `password=hunter2-"quoted"`, "password=[REDACTED:creds/db]"},
		{"number leaf", "pin 1234 port 5432", "pin [REDACTED:creds/db] port [REDACTED:creds/db]"},
		{"short leaves are kept", "ab and admin", "ab and [REDACTED:creds/db]"},
		{"whole object", `cfg={"user":"admin","password":"hunter2-\"quoted\"","port":5432,"pin":1234,"x":"ab"}`, "cfg=[REDACTED:creds/db]"},
		{"nothing", "all clear", "all clear"},
	}
	for _, tt := range text {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.String(tt.in); got != tt.want {
				t.Fatalf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := string(r.Bytes([]byte(tt.in))); got != tt.want {
				t.Fatalf("Bytes = %q", got)
			}
		})
	}

	docs := []struct {
		name, in, want string
	}{
		{"string value", `{"msg":"use sk-live-abc123 now"}`, `{"msg":"use [REDACTED:creds/token] now"}`},
		{"escaped secret", `{"p":"hunter2-\"quoted\""}`, `{"p":"[REDACTED:creds/db]"}`},
		{"unicode-escaped secret", `{"t":"sk-live-abc\u0031\u00323"}`, `{"t":"[REDACTED:creds/token]"}`},
		{"key", `{"sk-live-abc123":1}`, `{"[REDACTED:creds/token]":1}`},
		{"number", `{"pin":1234,"other":12345,"f":1.5}`, `{"pin":"[REDACTED:creds/db]","other":"[REDACTED:creds/db]5","f":1.5}`},
		{"JSON inside a string", `{"body":"{\"token\":\"sk-live-abc123\"}"}`, `{"body":"{\"token\":\"[REDACTED:creds/token]\"}"}`},
		{"layout kept", "{ \"a\" : [ true, null, \"admin\" ] }", "{ \"a\" : [ true, null, \"[REDACTED:creds/db]\" ] }"},
		{"untouched", `{"a":"b"}`, `{"a":"b"}`},
	}
	for _, tt := range docs {
		t.Run(tt.name, func(t *testing.T) {
			got := r.JSON(json.RawMessage(tt.in))
			if string(got) != tt.want {
				t.Fatalf("JSON(%s) = %s, want %s", tt.in, got, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("result is not JSON: %s", got)
			}
		})
	}
	if got := r.JSON(json.RawMessage(`{"broken": "sk-live-abc123"`)); string(got) != `{"broken": "[REDACTED:creds/token]"` {
		t.Fatalf("invalid JSON redacted as text: %s", got)
	}
}

func TestRedactAttempt(t *testing.T) {
	r := NewRedactor()
	r.Add("n/k", json.RawMessage(`"s3cr3t-value"`))
	a := &host.Attempt{
		Input: json.RawMessage(`{"q":"s3cr3t-value"}`), Output: json.RawMessage(`"s3cr3t-value"`),
		Interrupt: json.RawMessage(`{"ask":"s3cr3t-value"}`), Stdout: []byte("s3cr3t-value\n"), Stderr: []byte("e s3cr3t-value"),
		Logs: json.RawMessage(`[{"message":"s3cr3t-value"}]`), Events: json.RawMessage(`[{"v":"s3cr3t-value"}]`),
		AdapterCalls: json.RawMessage(`[{"req":"s3cr3t-value"}]`), Diagnostics: json.RawMessage(`{"d":"s3cr3t-value"}`),
		Trace: json.RawMessage(`[{"fn":"memory_get","result":"s3cr3t-value"}]`),
	}
	a.Error = newAbiError("E", "bad s3cr3t-value", `{"x":"s3cr3t-value"}`)
	orig := a.Error
	r.Attempt(a)
	b, _ := json.Marshal(a)
	// Only the trace keeps it (replay needs it); stdout/stderr are base64 in JSON.
	if n := strings.Count(string(b), "s3cr3t-value"); n != 1 || !strings.Contains(string(a.Trace), "s3cr3t-value") {
		t.Fatalf("secret left %d times: %s", n, b)
	}
	if string(a.Stdout) != "[REDACTED:n/k]\n" || string(a.Stderr) != "e [REDACTED:n/k]" {
		t.Fatalf("%q %q", a.Stdout, a.Stderr)
	}
	if orig.Message != "bad s3cr3t-value" {
		t.Fatal("the caller's error value was modified in place")
	}
	var zero *Redactor
	if zero.String("x") != "x" || NewRedactor().String("s3cr3t-value") != "s3cr3t-value" {
		t.Fatal("empty redactors must not change text")
	}
}
