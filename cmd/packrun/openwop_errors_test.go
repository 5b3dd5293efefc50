package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestOpenwopErrorScenarios ports openwop's errors.test.ts@5f098ffeb0,
// auth.test.ts@5f098ffeb0 and rate-limit-envelope.test.ts@01ad095d2a,
// run against a live serve over HTTP. Every token there may make one
// request (--rate-limit 0.001, a burst of 1), so that a second is the
// 429 the rate-limit scenario waits for.
func TestOpenwopErrorScenarios(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	tokens := make([]string, 4)
	for i := range tokens {
		tokens[i] = newToken(h, "default", "invoke,tasks:read,tasks:write")
	}
	bin := filepath.Join(dir, "packrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	s := startServeWith(t, bin, h.home, "--rate-limit", "0.001")
	s.waitUp(t)
	base := regexp.MustCompile(`packrun serving on (http://\S+)`).FindStringSubmatch(s.logs.String())[1]

	// errors.test.ts: an unknown run is 404 (or 403), a malformed
	// POST /v1/runs a 4xx, each in the envelope; no top-level
	// correlationId.
	t.Run("errors", func(t *testing.T) {
		r := owCall(t, base, tokens[0], "GET", "/v1/runs/openwop-conformance-this-run-id-does-not-exist", "")
		if r.code != 403 && r.code != 404 {
			t.Errorf("unknown run: %d %s", r.code, r.text)
		}
		owEnvelope(t, r)
		r = owCall(t, base, tokens[1], "POST", "/v1/runs", `{}`)
		if r.code < 400 || r.code >= 500 {
			t.Errorf("POST /v1/runs {}: %d %s", r.code, r.text)
		}
		owEnvelope(t, r)
		r = owCall(t, base, tokens[2], "GET", "/v1/runs/openwop-conformance-correlation-probe-"+strconv.FormatInt(time.Now().UnixNano(), 10), "")
		if r.code != 400 && r.code != 403 && r.code != 404 {
			t.Errorf("correlation probe: %d %s", r.code, r.text)
		}
		if _, ok := owEnvelope(t, r)["correlationId"]; ok {
			t.Errorf("top-level correlationId: %s", r.text)
		}
	})

	// auth.test.ts: no credential, or an invalid one, is 401 with error
	// and message strings.
	t.Run("auth", func(t *testing.T) {
		for _, tok := range []string{"", "hk_definitely_not_a_real_key_12345"} {
			r := owCall(t, base, tok, "POST", "/v1/runs", `{"workflowId":"conformance-noop"}`)
			if r.code != http.StatusUnauthorized {
				t.Errorf("token %q: %d %s", tok, r.code, r.text)
			}
			owEnvelope(t, r)
		}
	})

	// rate-limit-envelope.test.ts: a 429 is error "rate_limited", with
	// Retry-After, only the envelope's keys, details.scope in the enum
	// and details.retryAfterMs within 1.5 s of Retry-After. (The
	// scenario bursts discovery, which has no rate here, so it observes
	// no 429 and skips; the 429 of an openwop route is checked instead.)
	t.Run("rate-limit-envelope", func(t *testing.T) {
		owCall(t, base, tokens[3], "GET", "/v1/runs/run_x", "")
		r := owCall(t, base, tokens[3], "GET", "/v1/runs/run_x", "")
		if r.code != http.StatusTooManyRequests {
			t.Fatalf("second request of a token with a burst of 1: %d %s", r.code, r.text)
		}
		body := owEnvelope(t, r)
		if body["error"] != "rate_limited" {
			t.Errorf("error %v", body["error"])
		}
		sec, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || sec <= 0 {
			t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
		}
		d, _ := body["details"].(map[string]any)
		if sc := d["scope"]; sc != "tenant" && sc != "route" && sc != "global" && sc != "key" {
			t.Errorf("details.scope %v", sc)
		}
		ms, ok := d["retryAfterMs"].(float64)
		if !ok || ms/1000-float64(sec) > 1.5 || float64(sec)-ms/1000 > 1.5 {
			t.Errorf("details.retryAfterMs %v, Retry-After %d", d["retryAfterMs"], sec)
		}
		for i := 0; i < 50; i++ { // discovery is public: no rate
			if res, _ := anonGet(t, base+"/.well-known/openwop"); res.StatusCode != http.StatusOK {
				t.Fatalf("discovery %d: %d", i, res.StatusCode)
			}
		}
	})
}

type owAnswer struct {
	code   int
	header http.Header
	text   string
}

func owCall(t *testing.T, base, token, method, path, body string) owAnswer {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return owAnswer{res.StatusCode, res.Header, string(b)}
}

// owEnvelope checks r's body is openwop's error envelope as
// errors.test.ts's assertErrorEnvelope does: an object, error and
// message strings, details (when present) a non-null object with a
// non-empty string correlationId (when present), no other key.
func owEnvelope(t *testing.T, r owAnswer) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(r.text), &v); err != nil {
		t.Fatalf("not a JSON object: %s", r.text)
	}
	if _, ok := v["error"].(string); !ok {
		t.Errorf("error is not a string: %s", r.text)
	}
	if _, ok := v["message"].(string); !ok {
		t.Errorf("message is not a string: %s", r.text)
	}
	if d, ok := v["details"]; ok {
		dm, isObj := d.(map[string]any)
		if !isObj {
			t.Errorf("details is not an object: %s", r.text)
		}
		if c, ok := dm["correlationId"]; ok {
			if s, _ := c.(string); s == "" {
				t.Errorf("details.correlationId %v", c)
			}
		}
	}
	for k := range v {
		if k != "error" && k != "message" && k != "details" {
			t.Errorf("key %q outside {error, message, details}: %s", k, r.text)
		}
	}
	return v
}
