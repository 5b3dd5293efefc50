package api

import (
	"net/http"
	"testing"
)

// since takes a duration back from now as well as an RFC 3339 time, and
// ttl takes days, through the one parser the CLI uses (host.ParseDuration).
func TestSinceAndTTLTakeTheSharedDurations(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	e.enqueue(helloIntent)
	r := e.get("/v1/events?since=1h")
	wantStatus(t, r, http.StatusOK)
	if p := decode[eventPage](t, r); len(p.Events) == 0 {
		t.Fatalf("since=1h: no events: %+v", p)
	}
	wantError(t, e.get("/v1/events?since=-1h"), http.StatusBadRequest, CodeInvalid, "since")
	wantStatus(t, e.get("/v1/attempts?since=7d"), http.StatusOK)
	wantError(t, e.get("/v1/attempts?since=-1h"), http.StatusBadRequest, CodeInvalid, "since")
	wantStatus(t, e.do(http.MethodPut, "/v1/memory/notes/k?ttl=30d", "application/json", `{"value":1}`), http.StatusOK)
	wantError(t, e.do(http.MethodPut, "/v1/memory/notes/k?ttl=30x", "application/json", `{"value":1}`), http.StatusBadRequest, CodeInvalid, "ttl")
}
