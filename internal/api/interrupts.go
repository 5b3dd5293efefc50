package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/packrun/packrun/host"
)

// Interrupts is the part of the RunService that resolves the interrupt a
// run waits on (openwop spec/v1/interrupt.md, run-scoped surface).
type Interrupts interface {
	ResolveInterrupt(ctx context.Context, tenant, runID, nodeID string, value json.RawMessage, by string) (*host.Run, error)
}

// interruptBody is the body of POST /v1/runs/{id}/interrupts/{nodeId}.
type interruptBody struct {
	ResumeValue json.RawMessage `json:"resumeValue"`
}

// resolveInterrupt is POST /v1/runs/{id}/interrupts/{nodeId}.
func (s *server) resolveInterrupt(w http.ResponseWriter, r *http.Request, rs RunService) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var body interruptBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	run, err := rs.ResolveInterrupt(r.Context(), tenantOf(r, ""), r.PathValue("id"), r.PathValue("nodeId"), body.ResumeValue, askedBy(r))
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusOK, run)
	return nil
}
