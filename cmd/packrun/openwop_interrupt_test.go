package main

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenwopInterruptScenarios ports openwop's interrupt-approval
// scenario (interrupt-approval.test.ts@01ad095d2a) against a live serve,
// with conformance-approval, and what it does not reach: the events of a
// waiting run (interrupt.requested, approval.requested, approval.received
// with decidedBy), a second resolution refused, reject ending the run,
// another tenant's run not found, and a waiting run surviving a SIGKILL
// of serve, resolved by the next serve.
func TestOpenwopInterruptScenarios(t *testing.T) {
	_, serve := openwopServe(t, "invoke,tasks:read,tasks:write")
	s, o := serve()
	const wf, gate = "conformance-approval", "gate"
	o.advertised(t, wf)
	resolve := func(o openwopHost, runID, node string, value any) (int, map[string]any) {
		return o.do(t, "POST", "/v1/runs/"+runID+"/interrupts/"+node, map[string]any{"resumeValue": value})
	}

	// interrupt-approval.test.ts: accept resumes to completed.
	t.Run("interrupt-approval/accept", func(t *testing.T) {
		runID := o.startRun(t, wf, nil)
		if v := o.pollUntilStatus(t, runID, "waiting-approval"); v["currentNodeId"] != gate {
			t.Fatalf("suspended run's currentNodeId: %v", v)
		}
		evs := o.events(t, runID)
		for _, typ := range []string{"node.suspended", "interrupt.requested", "approval.requested"} {
			if e := findEvent(evs, typ); e == nil || e["nodeId"] != gate {
				t.Errorf("%s: %v (events %v)", typ, e, evs)
			}
		}
		if p, _ := findEvent(evs, "interrupt.requested")["payload"].(map[string]any); p["kind"] != "approval" || p["key"] == "" {
			t.Errorf("interrupt.requested payload %v", p)
		}
		if code, v := resolve(o, runID, gate, map[string]any{"action": "accept"}); code != http.StatusOK {
			t.Fatalf("resolve: %d %v", code, v)
		}
		if v := o.pollUntilTerminal(t, runID); v["status"] != "completed" {
			t.Fatalf("after accept: %v", v)
		}
		evs = o.events(t, runID)
		rec := findEvent(evs, "approval.received")
		p, _ := rec["payload"].(map[string]any)
		if rec == nil || p["action"] != "accept" || !strings.HasPrefix(fmt.Sprint(p["decidedBy"]), "token:") {
			t.Fatalf("approval.received %v", rec)
		}
		if done := findEvent(evs, "node.completed"); !strings.Contains(fmt.Sprint(done["payload"]), "accept") {
			t.Errorf("node.completed %v", done)
		}
		// A second resolution is refused, and changes nothing.
		if code, v := resolve(o, runID, gate, map[string]any{"action": "accept"}); code != http.StatusConflict {
			t.Fatalf("second resolve: %d %v", code, v)
		}
		if n := len(o.events(t, runID)); n != len(evs) {
			t.Fatalf("the refused resolution changed the log: %d events, then %d", len(evs), n)
		}
		// A replay fork reproduces the gate's recorded outcome.
		code, v := o.do(t, "POST", "/v1/runs/"+runID+":fork", map[string]any{"mode": "replay"})
		fork, _ := v["runId"].(string)
		if code != http.StatusCreated || fork == "" {
			t.Fatalf("fork: %d %v", code, v)
		}
		if v := o.pollUntilTerminal(t, fork); v["status"] != "completed" {
			t.Fatalf("fork: %v %v", v, o.events(t, fork))
		}
		if done := findEvent(o.events(t, fork), "node.completed"); !strings.Contains(fmt.Sprint(done["payload"]), "accept") || !strings.Contains(fmt.Sprint(done["payload"]), "replayed:true") {
			t.Fatalf("fork's node.completed %v", done)
		}
	})

	// interrupt-approval.test.ts: a payload outside {accept, reject} is 400
	// (or 422); the run still waits, and is cancelled.
	t.Run("interrupt-approval/invalid-payload", func(t *testing.T) {
		runID := o.startRun(t, wf, nil)
		o.pollUntilStatus(t, runID, "waiting-approval")
		code, v := resolve(o, runID, gate, map[string]any{"action": "maybe"})
		if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity {
			t.Fatalf("action maybe: %d %v", code, v)
		}
		if !strings.Contains(fmt.Sprint(v), "resumeValue.action") {
			t.Errorf("the refusal does not name resumeValue.action: %v", v)
		}
		if _, v := o.do(t, "GET", "/v1/runs/"+runID, nil); v["status"] != "waiting-approval" {
			t.Fatalf("after a refused resolution: %v", v)
		}
		if code, v := o.do(t, "POST", "/v1/runs/"+runID+"/cancel", map[string]any{"reason": "conformance-cleanup"}); code != http.StatusOK || v["status"] != "cancelled" {
			t.Fatalf("cancel a waiting run: %d %v", code, v)
		}
	})

	// interrupt-approval.test.ts: an unknown interrupt is 404.
	t.Run("interrupt-approval/unknown-interrupt", func(t *testing.T) {
		runID := o.startRun(t, wf, nil)
		o.pollUntilStatus(t, runID, "waiting-approval")
		if code, v := resolve(o, runID, "no-such-node", map[string]any{"action": "accept"}); code != http.StatusNotFound {
			t.Fatalf("unknown node: %d %v", code, v)
		}
		// Another tenant's run is not found, and stays waiting.
		other := o.token("globex", "invoke,tasks:read")
		if code, _ := get(t, "POST", o.base+"/v1/runs/"+runID+"/interrupts/"+gate, other, `{"resumeValue":{"action":"accept"}}`); code != http.StatusNotFound {
			t.Fatalf("another tenant's resolve: %d", code)
		}
		if _, v := o.do(t, "GET", "/v1/runs/"+runID, nil); v["status"] != "waiting-approval" {
			t.Fatalf("after another tenant's resolve: %v", v)
		}
		o.do(t, "POST", "/v1/runs/"+runID+"/cancel", map[string]any{"reason": "conformance-cleanup"})
	})

	t.Run("reject", func(t *testing.T) {
		runID := o.startRun(t, wf, nil)
		o.pollUntilStatus(t, runID, "waiting-approval")
		if code, v := resolve(o, runID, gate, map[string]any{"action": "reject"}); code != http.StatusOK {
			t.Fatalf("reject: %d %v", code, v)
		}
		if v := o.pollUntilTerminal(t, runID); v["status"] != "failed" || !strings.Contains(fmt.Sprint(v["error"]), "approval_rejected") {
			t.Fatalf("after reject: %v", v)
		}
	})

	// The run waits in the store: serve is killed, the next serve on the
	// home shows it waiting and resolves it.
	t.Run("restart", func(t *testing.T) {
		runID := o.startRun(t, wf, map[string]any{"order": 7})
		o.pollUntilStatus(t, runID, "waiting-approval")
		if err := s.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		s.Wait()
		s2, o2 := serve()
		t.Cleanup(func() {
			s2.Process.Signal(syscall.SIGTERM)
			s2.Wait()
		})
		if _, v := o2.do(t, "GET", "/v1/runs/"+runID, nil); v["status"] != "waiting-approval" || v["currentNodeId"] != gate {
			t.Fatalf("after the restart: %v", v)
		}
		if code, v := resolve(o2, runID, gate, map[string]any{"action": "accept", "note": "after restart"}); code != http.StatusOK {
			t.Fatalf("resolve after the restart: %d %v", code, v)
		}
		if v := o2.pollUntilTerminal(t, runID); v["status"] != "completed" {
			t.Fatalf("after accept: %v", v)
		}
		if done := findEvent(o2.events(t, runID), "node.completed"); !strings.Contains(fmt.Sprint(done["payload"]), "after restart") {
			t.Fatalf("node.completed %v", done)
		}
	})
}

// pollUntilStatus polls GET /v1/runs/{id} every 250 ms, as polling.ts's
// pollUntilStatus does, until the run's status is status.
func (o openwopHost) pollUntilStatus(t *testing.T, runID, status string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last map[string]any
	for time.Now().Before(deadline) {
		if code, v := o.do(t, "GET", "/v1/runs/"+runID, nil); code == http.StatusOK {
			last = v
			if v["status"] == status {
				return v
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("run %s never %s (last %v)", runID, status, last)
	return nil
}
