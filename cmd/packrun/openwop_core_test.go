package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestOpenwopCoreScenarios ports openwop's core scenarios that packrun
// passes beyond RFC 0008 (discovery@01ad095d2a, version-negotiation@5f098ffeb0,
// eventOrdering@01ad095d2a, idempotency@16a175bf4a), run against a live
// serve over HTTP. conformance-noop is not served here, so the run-backed
// ones use conformance-wasm-pack-roundtrip, the fixture packrun advertises.
func TestOpenwopCoreScenarios(t *testing.T) {
	o := startOpenwopHost(t, owInstalls[0])

	// discovery.test.ts: discovery and the OpenAPI document need no token.
	t.Run("discovery", func(t *testing.T) {
		res, body := anonGet(t, o.base+"/.well-known/openwop")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("discovery without a token: %d %v", res.StatusCode, body)
		}
		for _, f := range []string{"protocolVersion", "supportedEnvelopes", "schemaVersions", "limits"} {
			if _, ok := body[f]; !ok || body[f] == nil {
				t.Errorf("discovery lacks %s: %v", f, body)
			}
		}
		if res.Header.Get("Cache-Control") == "" {
			t.Errorf("discovery has no Cache-Control")
		}
		limits, _ := body["limits"].(map[string]any)
		for _, k := range []string{"clarificationRounds", "schemaRounds", "envelopesPerTurn"} {
			if v, ok := limits[k].(float64); !ok || v < 0 {
				t.Errorf("limits.%s: %v", k, limits[k])
			}
		}
		fs, _ := body["fixtures"].([]any)
		seen := map[any]bool{}
		for _, f := range fs {
			if s, ok := f.(string); !ok || s == "" || seen[f] {
				t.Errorf("fixtures entry %v (fixtures %v)", f, fs)
			}
			seen[f] = true
		}
		res, doc := anonGet(t, o.base+"/v1/openapi.json")
		if v, _ := doc["openapi"].(string); res.StatusCode != http.StatusOK || !regexp.MustCompile(`^3\.[1-9]`).MatchString(v) {
			t.Fatalf("openapi.json without a token: %d %v", res.StatusCode, doc["openapi"])
		}
	})

	// version-negotiation.test.ts: protocolVersion, read without a token.
	t.Run("version-negotiation/protocolVersion", func(t *testing.T) {
		_, body := anonGet(t, o.base+"/.well-known/openwop")
		if v, _ := body["protocolVersion"].(string); v == "" {
			t.Fatalf("protocolVersion %v", body["protocolVersion"])
		}
	})

	const roundtrip = "conformance-wasm-pack-roundtrip"
	finished := func(t *testing.T) string {
		t.Helper()
		runID := o.startRun(t, roundtrip, map[string]any{"name": "poll"})
		o.pollUntilTerminal(t, runID)
		return runID
	}
	poll := func(t *testing.T, runID, query string) []map[string]any {
		t.Helper()
		code, text := get(t, "GET", o.base+"/v1/runs/"+runID+"/events/poll"+query, o.key, "")
		var v struct {
			Events     []map[string]any
			IsComplete *bool
		}
		if code != http.StatusOK || json.Unmarshal([]byte(text), &v) != nil || v.Events == nil || v.IsComplete == nil {
			t.Fatalf("events/poll%s: %d %s", query, code, text)
		}
		if !*v.IsComplete { // every run polled here is terminal
			t.Errorf("events/poll%s of a terminal run: isComplete false", query)
		}
		return v.Events
	}

	// eventOrdering.test.ts: one poll is in order, repeated polls agree,
	// exactly one terminal event and it is the last.
	t.Run("eventOrdering", func(t *testing.T) {
		runID := finished(t)
		a, b := poll(t, runID, ""), poll(t, runID, "")
		if len(a) < 2 || len(a) != len(b) {
			t.Fatalf("polls of %d and %d events", len(a), len(b))
		}
		terminal := 0
		for i := range a {
			if i > 0 && a[i]["sequence"].(float64) < a[i-1]["sequence"].(float64) {
				t.Errorf("event %d's sequence %v before %v", i, a[i]["sequence"], a[i-1]["sequence"])
			}
			if a[i]["sequence"] != b[i]["sequence"] {
				t.Errorf("event %d: sequence %v then %v", i, a[i]["sequence"], b[i]["sequence"])
			}
			if typ := a[i]["type"]; typ == "run.completed" || typ == "run.failed" || typ == "run.cancelled" {
				terminal++
				if i != len(a)-1 {
					t.Errorf("terminal event %v at %d of %d", typ, i, len(a))
				}
			}
		}
		if terminal != 1 {
			t.Errorf("%d terminal events", terminal)
		}
	})

	// version-negotiation.test.ts: RunEventDoc's six fields, strictly
	// monotonic sequences, and a lastSequence past the end is 200, empty.
	t.Run("version-negotiation/events", func(t *testing.T) {
		runID := finished(t)
		evs := poll(t, runID, "?lastSequence=0&timeout=1")
		if len(evs) == 0 {
			t.Fatal("no events")
		}
		for i, e := range evs {
			for _, f := range []string{"eventId", "runId", "type", "timestamp"} {
				if v, ok := e[f].(string); !ok || v == "" {
					t.Errorf("event %d: %s %v", i, f, e[f])
				}
			}
			if _, ok := e["payload"]; !ok {
				t.Errorf("event %d has no payload", i)
			}
			seq, ok := e["sequence"].(float64)
			if !ok || seq < 0 || seq != float64(int(seq)) {
				t.Errorf("event %d: sequence %v", i, e["sequence"])
			}
			if i > 0 && seq <= evs[i-1]["sequence"].(float64) {
				t.Errorf("event %d: sequence %v after %v", i, seq, evs[i-1]["sequence"])
			}
		}
		if past := poll(t, runID, "?lastSequence=99999&timeout=1"); len(past) != 0 {
			t.Errorf("past the end: %v", past)
		}
		// Cursor semantics: after the second event, the rest.
		rest := poll(t, runID, "?lastSequence="+strconv.Itoa(int(evs[1]["sequence"].(float64))))
		if len(rest) != len(evs)-2 || rest[0]["eventId"] != evs[2]["eventId"] {
			t.Errorf("after sequence %v: %v", evs[1]["sequence"], rest)
		}
	})

	// idempotency.test.ts: the same key and body answer the same run,
	// marked as a replay; the key with another body is 409
	// idempotency_key_mismatch without a runId. Beyond it: keys are per
	// tenant, and a malformed key is a 400 naming the header.
	t.Run("idempotency", func(t *testing.T) {
		body := `{"workflowId":"` + roundtrip + `","inputs":{"name":"abc-123"}}`
		first := postKeyed(t, o.base, o.key, "key-replay", body)
		second := postKeyed(t, o.base, o.key, "key-replay", body)
		if first.code != http.StatusCreated || first.body["runId"] == nil {
			t.Fatalf("first: %d %v", first.code, first.body)
		}
		if (second.code != 200 && second.code != 201) || second.body["runId"] != first.body["runId"] || second.header.Get("Openwop-Idempotent-Replay") == "" {
			t.Fatalf("replay: %d %v %v (first %v)", second.code, second.body, second.header, first.body)
		}
		if first.header.Get("Openwop-Idempotent-Replay") != "" {
			t.Errorf("the first request is marked a replay")
		}
		other := postKeyed(t, o.base, o.key, "key-replay", `{"workflowId":"`+roundtrip+`","inputs":{"name":"DIFFERENT"}}`)
		if other.code != http.StatusConflict || other.body["error"] != "idempotency_key_mismatch" || other.body["runId"] != nil {
			t.Fatalf("another body: %d %v", other.code, other.body)
		}
		globex := postKeyed(t, o.base, o.token("globex", "invoke,tasks:read"), "key-replay", body)
		if globex.code != http.StatusCreated || globex.body["runId"] == first.body["runId"] {
			t.Fatalf("another tenant's same key: %d %v", globex.code, globex.body)
		}
		bad := postKeyed(t, o.base, o.key, "no spaces", body)
		if d, _ := bad.body["details"].(map[string]any); bad.code != http.StatusBadRequest || d["field"] != "Idempotency-Key" {
			t.Fatalf("malformed key: %d %v", bad.code, bad.body)
		}
		o.pollUntilTerminal(t, first.body["runId"].(string))
	})
}

type keyedAnswer struct {
	code   int
	header http.Header
	body   map[string]any
}

// postKeyed is POST /v1/runs with an Idempotency-Key.
func postKeyed(t *testing.T, base, token, key, body string) keyedAnswer {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/runs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Idempotency-Key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	json.NewDecoder(res.Body).Decode(&v)
	return keyedAnswer{res.StatusCode, res.Header, v}
}

// anonGet is a GET without a token, as the driver's {authenticated: false}.
func anonGet(t *testing.T, url string) (*http.Response, map[string]any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v map[string]any
	json.NewDecoder(res.Body).Decode(&v)
	return res, v
}
