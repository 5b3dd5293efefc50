package api

import (
	"net/http"
	"testing"
)

// TestRunsUnserved: without a RunService every openwop route answers 503,
// and nothing else is looked at first.
func TestRunsUnserved(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	for _, r := range []resp{
		e.get("/.well-known/openwop"),
		e.post("/v1/runs", `{"workflowId":"x"}`),
		e.get("/v1/runs/run_1"),
		e.get("/v1/runs/run_1/events"),
		e.get("/v1/runs/run_1/events/poll"),
		e.post("/v1/runs/run_1:fork", `{"mode":"replay"}`),
		e.post("/v1/runs/run_1/cancel", `{}`),
		e.post("/v1/openwop/workflows", `{}`),
	} {
		wantOpenwopError(t, r, http.StatusServiceUnavailable, CodeUnavailable, "")
	}
}
