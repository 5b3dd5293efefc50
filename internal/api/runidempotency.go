package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/packrun/packrun/host"
)

// idempotencyHeader is the request header of openwop's idempotency.md
// Layer 1 on POST /v1/runs, and replayHeader the answer's mark of a run
// the key started before.
const (
	idempotencyHeader = "Idempotency-Key"
	replayHeader      = "Openwop-Idempotent-Replay"
	maxIdempotencyKey = 255
)

// CodeIdempotencyMismatch: an Idempotency-Key reused with another body
// (openwop idempotency.md's canonical code).
const CodeIdempotencyMismatch = "idempotency_key_mismatch"

// startRunOnce is POST /v1/runs with an Idempotency-Key: 201 and the run
// it started, the first time and on a replay within 24 h (marked with
// Openwop-Idempotent-Replay: true); the key with another body is 409
// idempotency_key_mismatch and starts nothing.
func (s *server) startRunOnce(w http.ResponseWriter, r *http.Request, rs RunService, body runStartBody) error {
	vs := r.Header.Values(idempotencyHeader)
	key := ""
	if len(vs) == 1 {
		key = vs[0]
	}
	if err := checkIdempotencyKey(vs, key); err != nil {
		return err
	}
	run, created, err := rs.StartRunConfigured(r.Context(), tenantOf(r, ""), body.WorkflowID, body.Inputs, body.Configurable, key)
	if errors.Is(err, host.ErrIdempotencyMismatch) {
		return refuse(http.StatusConflict, CodeIdempotencyMismatch, idempotencyHeader, fmt.Sprintf("Idempotency-Key %q was used with another request body; use a new key", key))
	}
	if err != nil {
		return err
	}
	if created {
		s.recordCall(r, "", "")
	} else {
		w.Header().Set(replayHeader, "true")
	}
	reply(w, http.StatusCreated, runStarted{RunID: run.RunID, Status: run.Status})
	return nil
}

// checkIdempotencyKey refuses anything but one key of 1 to 255 visible
// ASCII characters.
func checkIdempotencyKey(vs []string, key string) error {
	if len(vs) != 1 {
		return refuse(http.StatusBadRequest, CodeInvalid, idempotencyHeader, "Idempotency-Key: give it once")
	}
	if key == "" || len(key) > maxIdempotencyKey {
		return refuse(http.StatusBadRequest, CodeInvalid, idempotencyHeader, fmt.Sprintf("Idempotency-Key: must be 1 to %d characters", maxIdempotencyKey))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return refuse(http.StatusBadRequest, CodeInvalid, idempotencyHeader, "Idempotency-Key: must be visible ASCII characters")
		}
	}
	return nil
}
