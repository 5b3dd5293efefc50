package main

import (
	"database/sql"
	"net/http"
	"slices"
	"syscall"
	"testing"
)

// TestOpenwopAdvertisedScenarios ports the scenarios of what packrun
// advertises in discovery beyond the Wasm runtime, against a live serve:
// replay-fork.test.ts@5f098ffeb0 (mode replay; conformance-approval, run
// to completed, stands in for conformance-noop) and
// audit-log-integrity.test.ts@7d205bf948, with the tamper check the
// latter leaves to the host: an event rewritten in the store makes
// chainValid false, its seq an anomaly.
func TestOpenwopAdvertisedScenarios(t *testing.T) {
	h, serve := openwopServe(t, "invoke,tasks:read,tasks:write,evidence:read")
	s, o := serve()
	finished := func(t *testing.T) string {
		t.Helper()
		runID := o.startRun(t, "conformance-approval", nil)
		o.pollUntilStatus(t, runID, "waiting-approval")
		if code, v := o.do(t, "POST", "/v1/runs/"+runID+"/interrupts/gate", map[string]any{"resumeValue": map[string]any{"action": "accept"}}); code != http.StatusOK {
			t.Fatalf("resolve: %d %v", code, v)
		}
		if v := o.pollUntilTerminal(t, runID); v["status"] != "completed" {
			t.Fatalf("source run: %v", v)
		}
		return runID
	}

	t.Run("replay-fork", func(t *testing.T) {
		_, d := anonGet(t, o.base+"/.well-known/openwop")
		replay, _ := d["replay"].(map[string]any)
		if modes, _ := replay["modes"].([]any); replay["supported"] != true || !slices.Contains(modes, any("replay")) {
			t.Fatalf("discovery's replay: %v", d["replay"])
		}
		src := finished(t)
		code, v := o.do(t, "POST", "/v1/runs/"+src+":fork", map[string]any{"fromSeq": 0, "mode": "replay"})
		fork, _ := v["runId"].(string)
		if code != http.StatusCreated || fork == "" || fork == src || v["sourceRunId"] != src || v["mode"] != "replay" {
			t.Fatalf("fork: %d %v", code, v)
		}
		if v := o.pollUntilTerminal(t, fork); v["status"] != "completed" {
			t.Fatalf("fork: %v", v)
		}
		for _, c := range []struct {
			body map[string]any
			code int
		}{
			{map[string]any{"fromSeq": -1, "mode": "replay"}, http.StatusBadRequest},
			{map[string]any{"fromSeq": 99999, "mode": "replay"}, http.StatusUnprocessableEntity},
			{map[string]any{"fromSeq": 0, "mode": "replay", "runOptionsOverlay": map[string]any{"configurable": map[string]any{"recursionLimit": 50}}}, http.StatusBadRequest},
		} {
			if code, v := o.do(t, "POST", "/v1/runs/"+src+":fork", c.body); code != c.code {
				t.Errorf("fork %v: %d %v, want %d", c.body, code, v, c.code)
			}
		}
		if code, v := o.do(t, "POST", "/v1/runs/openwop-conformance-no-such-run-id:fork", map[string]any{"fromSeq": 0, "mode": "replay"}); code != http.StatusNotFound {
			t.Errorf("fork of no run: %d %v", code, v)
		}
	})

	verify := func(t *testing.T, o openwopHost) map[string]any {
		t.Helper()
		code, v := o.do(t, "GET", "/v1/audit/verify?fromSeq=0&toSeq=100", nil)
		if code != http.StatusOK {
			t.Fatalf("audit/verify: %d %v", code, v)
		}
		return v
	}
	t.Run("audit-log-integrity", func(t *testing.T) {
		finished(t) // something in the evidence chain
		_, d := o.do(t, "GET", "/.well-known/openwop", nil)
		a, _ := d["auth"].(map[string]any)
		integrity, _ := a["auditLogIntegrity"].(map[string]any)
		if ps, _ := a["profiles"].([]any); !slices.Contains(ps, any("openwop-audit-log-integrity")) {
			t.Fatalf("discovery's auth: %v", d["auth"])
		}
		if k, _ := integrity["checkpointPublicKey"].(string); integrity["hashChain"] != true || integrity["checkpointSignatureAlgorithm"] == nil || k == "" {
			t.Fatalf("auditLogIntegrity: %v", integrity)
		}
		v := verify(t, o)
		cps, _ := v["checkpoints"].([]any)
		anomalies, ok := v["anomalies"].([]any)
		if v["chainValid"] != true || !ok || len(anomalies) != 0 || len(cps) == 0 {
			t.Fatalf("audit/verify: %v", v)
		}
		if sig, _ := cps[0].(map[string]any)["signature"].(string); sig == "" {
			t.Fatalf("checkpoint without a signature: %v", cps[0])
		}
		// Without evidence:read, 403.
		if code, _ := get(t, "GET", o.base+"/v1/audit/verify", o.token("default", "tasks:read"), ""); code != http.StatusForbidden {
			t.Fatalf("audit/verify without evidence:read: %d", code)
		}
	})

	t.Run("audit-log-integrity/tampered", func(t *testing.T) {
		s.Process.Signal(syscall.SIGTERM)
		s.Wait()
		var seq int64
		tamperLog(t, h.home, func(db *sql.DB) error {
			if err := db.QueryRow(`SELECT max(seq) FROM runtime_events`).Scan(&seq); err != nil {
				return err
			}
			_, err := db.Exec(`UPDATE runtime_events SET data = '{"forged":true}' WHERE seq = ?`, seq-1)
			return err
		})
		s2, o2 := serve()
		t.Cleanup(func() {
			s2.Process.Signal(syscall.SIGTERM)
			s2.Wait()
		})
		v := verify(t, o2)
		anomalies, _ := v["anomalies"].([]any)
		if v["chainValid"] != false || len(anomalies) != 1 || anomalies[0].(map[string]any)["seq"] != float64(seq-1) {
			t.Fatalf("audit/verify of a tampered chain (event %d): %v", seq-1, v)
		}
	})
}
