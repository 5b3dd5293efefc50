package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// errorOf decodes the error envelope of r.
func errorOf(t *testing.T, r resp) errorDetail {
	t.Helper()
	var body errorBody
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatalf("not an error envelope: %s", r.body)
	}
	return body.Error
}

// wantNothingStored fails if e's store holds any task or attempt.
func (e *env) wantNothingStored(t *testing.T) {
	t.Helper()
	if list := e.listTasks("?limit=100"); len(list) != 0 {
		t.Fatalf("stored %d tasks", len(list))
	}
	if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 0 {
		t.Fatalf("recorded %d attempts", len(list))
	}
}

// TestStrictBodies: a body with invalid UTF-8 or a duplicate key anywhere,
// or an invocation for a tenant whose name is outside the grammar, is a
// 400 that says what and where, and nothing is stored or run.
func TestStrictBodies(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	const intent = `"task_type":"hello.wat","source":"t"`
	for _, tc := range []struct {
		name, path, body string
		code, field      string
		says             []string // parts of the message
	}{
		// Invalid UTF-8: stored raw (payload) or replaced by U+FFFD (keys,
		// strings) before.
		{"bad UTF-8 in payload", "/v1/tasks", `{` + intent + `,"payload":{"name":"a` + "\xff" + `b"}}`, CodeInvalid, "payload.name", []string{"not valid UTF-8", "$.payload.name"}},
		{"bad UTF-8 deep in payload", "/v1/tasks", `{` + intent + `,"payload":{"l":[1,{"x":"` + "\xc3" + `"}]}}`, CodeInvalid, "payload.l[1].x", []string{"not valid UTF-8"}},
		{"bad UTF-8 in source", "/v1/tasks", `{"task_type":"hello.wat","source":"s` + "\xed\xa0\x80" + `","payload":{}}`, CodeInvalid, "source", []string{"not valid UTF-8", "$.source"}},
		{"bad UTF-8 in a key", "/v1/tasks", `{` + intent + `,"payload":{"n` + "\xff" + `":1}}`, CodeInvalid, "payload", []string{"not valid UTF-8", "in an object key"}},
		{"bad UTF-8 in a top-level key", "/v1/tasks", `{"sou` + "\xfe" + `rce":"t","task_type":"hello.wat","payload":{}}`, CodeBadRequest, "", []string{"not valid UTF-8", "in an object key"}},
		{"bad UTF-8 outside strings", "/v1/tasks", `{` + intent + `,"payload":` + "\xff" + `}`, CodeInvalid, "payload", []string{"not valid UTF-8"}},
		{"unpaired surrogate escape", "/v1/tasks", `{` + intent + `,"payload":{"s":"\ud800"}}`, CodeInvalid, "payload.s", []string{"unpaired surrogate"}},
		{"bad UTF-8 in input", "/v1/invoke", `{"pack":"local.hello.wat","input":{"name":"` + "\xff" + `"}}`, CodeInvalid, "input.name", []string{"not valid UTF-8"}},
		{"bad UTF-8 in tenant", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"a` + "\x80" + `"}`, CodeInvalid, "tenant", []string{"not valid UTF-8"}},

		// Duplicate keys: the last one won before.
		{"duplicate source", "/v1/tasks", `{"task_type":"hello.wat","source":"a","source":"b","payload":{}}`, CodeInvalid, "source", []string{"duplicate key", "$.source"}},
		{"duplicate task_type", "/v1/tasks", `{"task_type":"nobody.serves","source":"t","payload":{},"task_type":"hello.wat"}`, CodeInvalid, "task_type", []string{"duplicate key"}},
		{"duplicate by escape", "/v1/tasks", `{"task_type":"hello.wat","source":"a","\u0073ource":"b","payload":{}}`, CodeInvalid, "source", []string{"duplicate key"}},
		{"duplicate in payload", "/v1/tasks", `{` + intent + `,"payload":{"name":"a","name":"b"}}`, CodeInvalid, "payload.name", []string{"duplicate key", "$.payload.name"}},
		{"duplicate deep in payload", "/v1/tasks", `{` + intent + `,"payload":{"x":[{"k":1},{"k":1,"k":2}]}}`, CodeInvalid, "payload.x[1].k", []string{"duplicate key"}},
		{"duplicate in schedule", "/v1/tasks", `{` + intent + `,"payload":{},"schedule":{"delay_minutes":1,"delay_minutes":0}}`, CodeInvalid, "schedule.delay_minutes", []string{"duplicate key"}},
		{"duplicate huge key", "/v1/tasks", `{` + intent + `,"payload":{"` + strings.Repeat("k", 5000) + `":1,"` + strings.Repeat("k", 5000) + `":2}}`, CodeInvalid, `payload["` + strings.Repeat("k", 64) + `…"]`, []string{"duplicate key"}},
		{"duplicate pack", "/v1/invoke", `{"pack":"local.nope","pack":"local.hello.wat"}`, CodeInvalid, "pack", []string{"duplicate key"}},
		{"duplicate tenant", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"a","tenant":"b"}`, CodeInvalid, "tenant", []string{"duplicate key"}},
		{"duplicate in input", "/v1/invoke", `{"pack":"local.hello.wat","input":{"name":"a","name":"b"}}`, CodeInvalid, "input.name", []string{"duplicate key"}},

		// Tenants outside the grammar.
		{"tenant path", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"../alice"}`, CodeInvalid, "tenant", []string{`"../alice" is not a tenant name`}},
		{"tenant dots", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"a..b"}`, CodeInvalid, "tenant", []string{`".."`}},
		{"tenant uppercase", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"Alice"}`, CodeInvalid, "tenant", []string{`"Alice"`}},
		{"tenant space", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"alice "}`, CodeInvalid, "tenant", []string{`"alice "`}},
		{"tenant slash", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"a/b"}`, CodeInvalid, "tenant", []string{`"a/b"`}},
		{"tenant control", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"a\nb"}`, CodeInvalid, "tenant", []string{`"a\nb"`}},
		{"tenant too long", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"` + strings.Repeat("a", 64) + `"}`, CodeInvalid, "tenant", []string{"64 bytes; the limit is 63"}},
		{"tenant huge", "/v1/invoke", `{"pack":"local.hello.wat","tenant":"` + strings.Repeat("A", 100000) + `"}`, CodeInvalid, "tenant", []string{"…"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(tc.path, tc.body)
			wantError(t, r, http.StatusBadRequest, tc.code, tc.field)
			msg := errorOf(t, r).Message
			for _, part := range tc.says {
				if !strings.Contains(msg, part) {
					t.Errorf("message %q does not say %q", msg, part)
				}
			}
			if len(r.body) > 1024 {
				t.Errorf("a %d-byte error", len(r.body))
			}
			e.wantNothingStored(t)
		})
	}
	// For contrast: the same bodies, well-formed, are taken; "default"
	// and names in the grammar are tenants.
	e.enqueue(`{` + intent + `,"payload":{"name":"aéb","l":[{"k":1},{"k":2}],"s":"\ud83d\ude00"}}`)
	for _, tenant := range []string{"default", "acme-corp.eu_1", strings.Repeat("a", 63)} {
		wantStatus(t, e.post("/v1/invoke", `{"pack":"local.hello.wat","input":{"name":"x"},"tenant":"`+tenant+`"}`), http.StatusOK)
	}
	if list := decode[attemptList](t, e.get("/v1/attempts?tenant=acme-corp.eu_1")).Attempts; len(list) != 1 {
		t.Fatalf("%d attempts of tenant acme-corp.eu_1", len(list))
	}
}

// TestContentType: a request other than GET or HEAD that carries a body,
// or names a Content-Type at all, must say application/json (a web page
// can send text/plain, forms and multipart cross-site without a CORS
// preflight); nothing is stored, canceled or run.
func TestContentType(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	pending := e.enqueue(helloIntent)
	for _, tc := range []struct {
		name, method, path, contentType, body string
		says                                  string
	}{
		{"no Content-Type", "POST", "/v1/tasks", "", helloIntent, "needs Content-Type: application/json"},
		{"text/plain", "POST", "/v1/tasks", "text/plain", helloIntent, `"text/plain"`},
		{"text/plain charset", "POST", "/v1/tasks", "text/plain;charset=UTF-8", helloIntent, "not supported"},
		{"form", "POST", "/v1/tasks", "application/x-www-form-urlencoded", helloIntent, "not supported"},
		{"multipart", "POST", "/v1/tasks", "multipart/form-data; boundary=x", helloIntent, "not supported"},
		{"malformed", "POST", "/v1/tasks", "application/json; charset", helloIntent, "not supported"},
		{"other charset", "POST", "/v1/tasks", "application/json; charset=iso-8859-1", helloIntent, `charset "iso-8859-1"`},
		{"huge Content-Type", "POST", "/v1/tasks", "text/" + strings.Repeat("p", 5000), helloIntent, "…"},
		{"invoke without", "POST", "/v1/invoke", "", `{"pack":"local.hello.wat"}`, "needs Content-Type"},
		{"invoke as text", "POST", "/v1/invoke", "text/plain", `{"pack":"local.hello.wat"}`, "not supported"},
		{"cancel as a form", "POST", "/v1/tasks/" + pending.TaskID + ":cancel", "application/x-www-form-urlencoded", "", "not supported"},
		{"cancel as text", "POST", "/v1/tasks/" + pending.TaskID + ":cancel", "", "x", "needs Content-Type"},
		{"PUT as text", "PUT", "/v1/tasks", "text/plain", "{}", "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, tc.contentType, tc.body)
			wantError(t, r, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "")
			if msg := errorOf(t, r).Message; !strings.Contains(msg, tc.says) || len(msg) > 200 {
				t.Errorf("message %q does not say %q (or is long)", msg, tc.says)
			}
			if list := e.listTasks(""); len(list) != 1 || list[0].Status != "pending" {
				t.Fatalf("tasks changed: %v", ids(list))
			}
			if list := decode[attemptList](t, e.get("/v1/attempts")).Attempts; len(list) != 0 {
				t.Fatalf("recorded %d attempts", len(list))
			}
		})
	}
	// Accepted: JSON, with a UTF-8 charset, in any case, and a +json type;
	// a POST without a body needs none.
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8", "application/vnd.packrun+json"} {
		wantStatus(t, e.do(http.MethodPost, "/v1/tasks", ct, helloIntent), http.StatusCreated)
	}
	wantStatus(t, e.do(http.MethodPost, "/v1/tasks/"+pending.TaskID+":cancel", "", ""), http.StatusOK)
	if n := len(e.listTasks("")); n != 5 {
		t.Fatalf("%d tasks, want 5", n)
	}
}

// TestHostHeader: an API on a loopback address answers only requests for
// a loopback host (a page on attacker.example whose name now resolves to
// 127.0.0.1 sends Host: attacker.example); on another address, any Host.
func TestHostHeader(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		refuses bool // a foreign Host
	}{
		{"", true},
		{"127.0.0.1:7070", true},
		{"127.0.0.53:80", true},
		{"[::1]:7070", true},
		{"localhost:7070", true},
		{"[::ffff:127.0.0.1]:7070", true},
		{"0.0.0.0:7070", false},
		{"[::]:7070", false},
		{":7070", false},
		{"192.0.2.10:7070", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			if got := servesLoopback(tc.addr); got != tc.refuses {
				t.Fatalf("servesLoopback(%q) = %v", tc.addr, got)
			}
			// A listen address of "" is every interface: serve's
			// checks (--insecure-no-auth, tokens) must not take it
			// for loopback.
			if got := IsLoopbackAddr(tc.addr); got != (tc.refuses && tc.addr != "") {
				t.Fatalf("IsLoopbackAddr(%q) = %v", tc.addr, got)
			}
		})
	}

	e := newEnv(t, newBackend(t), func(c *Config) { c.Addr = "127.0.0.1:7070" })
	send := func(method, path, hostHeader, body string) resp {
		t.Helper()
		req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = hostHeader
		req.Header.Set("Content-Type", "application/json")
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{res.StatusCode, res.Header, b}
	}
	for _, h := range []string{"attacker.example", "attacker.example:7070", "127.0.0.1.nip.io", "localhost.attacker.example", "192.168.1.10:7070", "[::2]:7070", "0.0.0.0:7070", "[fe80::1%25eth0]:7070", "x:y:z"} {
		t.Run("refused "+h, func(t *testing.T) {
			for _, rq := range []struct{ method, path, body string }{
				{"GET", "/v1/tasks", ""},
				{"GET", "/.well-known/packrun", ""},
				{"GET", "/nowhere", ""},
				{"POST", "/v1/tasks", helloIntent},
				{"POST", "/v1/invoke", `{"pack":"local.hello.wat"}`},
			} {
				r := send(rq.method, rq.path, h, rq.body)
				wantError(t, r, http.StatusMisdirectedRequest, CodeMisdirected, "")
				if msg := errorOf(t, r).Message; !strings.Contains(msg, "DNS rebinding") || !strings.Contains(msg, "127.0.0.1:7070") {
					t.Errorf("message %q", msg)
				}
			}
			e.wantNothingStored(t)
		})
	}
	for _, h := range []string{"localhost", "LocalHost:7070", "localhost.:1", "127.0.0.1", "127.0.0.1:7070", "127.9.8.7:1", "[::1]", "[::1]:7070"} {
		t.Run("served "+h, func(t *testing.T) {
			wantStatus(t, send("GET", "/v1/tasks", h, ""), http.StatusOK)
		})
	}
	wantStatus(t, send("POST", "/v1/tasks", "localhost:7070", helloIntent), http.StatusCreated)

	// On a non-loopback address there is no Host check.
	open := newEnv(t, newBackend(t), func(c *Config) { c.Addr = "0.0.0.0:7070" })
	req, _ := http.NewRequest(http.MethodGet, open.url+"/v1/tasks", nil)
	req.Host = "attacker.example"
	res, err := open.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("non-loopback server: status %d", res.StatusCode)
	}
}

// TestShortBody: a client that sends less than its Content-Length, or
// stops in the middle of a chunked body, and half-closes gets a 400 that
// says so (not a 500), and nothing is stored; a Content-Length over the
// limit is a 413 before any of the body is read.
func TestShortBody(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	addr := strings.TrimPrefix(e.url, "http://")
	raw := func(t *testing.T, request string, closeWrite bool) (int, errorDetail) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(c, request); err != nil {
			t.Fatal(err)
		}
		if closeWrite {
			c.(*net.TCPConn).CloseWrite()
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body errorBody
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body.Error
	}
	head := func(path, extra string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" + extra + "\r\n"
	}
	part := helloIntent[:20]
	for _, tc := range []struct {
		name, request string
		closeWrite    bool
		status        int
		code, says    string
	}{
		{"short", head("/v1/tasks", "Content-Length: 100\r\n") + part, true, 400, CodeBadRequest, "request body ended early: 20 of the 100 bytes"},
		{"short invoke", head("/v1/invoke", "Content-Length: 100\r\n") + part, true, 400, CodeBadRequest, "ended early"},
		{"whole but for one byte", head("/v1/tasks", fmt.Sprintf("Content-Length: %d\r\n", len(helloIntent))) + helloIntent[:len(helloIntent)-1], true, 400, CodeBadRequest, "ended early"},
		{"chunked, cut", head("/v1/tasks", "Transfer-Encoding: chunked\r\n") + fmt.Sprintf("%x\r\n", len(helloIntent)) + part, true, 400, CodeBadRequest, "ended early"},
		{"too large, announced", head("/v1/tasks", fmt.Sprintf("Content-Length: %d\r\n", DefaultMaxBodyBytes+1)) + part, false, 413, CodeTooLarge, "over the 1048576-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, d := raw(t, tc.request, tc.closeWrite)
			if status != tc.status || d.Code != tc.code || !strings.Contains(d.Message, tc.says) {
				t.Fatalf("%d %+v, want %d %s saying %q", status, d, tc.status, tc.code, tc.says)
			}
			e.wantNothingStored(t)
		})
	}
	// The same request, whole, is taken.
	status, _ := raw(t, head("/v1/tasks", fmt.Sprintf("Content-Length: %d\r\nConnection: close\r\n", len(helloIntent)))+helloIntent, false)
	if status != http.StatusCreated {
		t.Fatalf("whole request: %d", status)
	}
}
