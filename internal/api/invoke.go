package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/buildinfo"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

type invokeRequest struct {
	Pack   string          `json:"pack"` // name or name@version
	Node   string          `json:"node"` // typeId; may be empty for a single-node pack
	Input  json.RawMessage `json:"input"`
	Tenant string          `json:"tenant"`
}

type invokeResponse struct {
	AttemptID  string          `json:"attempt_id"`
	Pack       string          `json:"pack"` // name@version that ran
	Node       string          `json:"node"`
	Outcome    abi.Outcome     `json:"outcome"`
	Output     json.RawMessage `json:"output"`
	Error      *abi.Error      `json:"error"`
	Interrupt  json.RawMessage `json:"interrupt"`
	Events     json.RawMessage `json:"events"`
	DurationMs float64         `json:"duration_ms"`
}

// invoke is POST /v1/invoke: one node of an installed pack, run outside
// the queue and recorded as an attempt. Whatever the node did (completed,
// suspended, failed, breached a limit) is a 200; the reply is built from
// the recorded attempt, so it is redacted exactly as the evidence is.
func (s *server) invoke(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Dispatcher == nil {
		return refuse(http.StatusServiceUnavailable, CodeUnavailable, "", "this server does not invoke nodes")
	}
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var req invokeRequest
	if err := decodeStrict(b, &req); err != nil {
		return err
	}
	const op = "invoke"
	name, _, _ := strings.Cut(req.Pack, "@")
	if err := host.CheckID(op, "pack", req.Pack); err != nil {
		return err
	}
	if name == "" {
		return refuse(http.StatusBadRequest, CodeInvalid, "pack", "pack: must be name or name@version")
	}
	if req.Tenant != "" {
		if err := host.CheckTenant(op, req.Tenant); err != nil {
			return err
		}
	}
	if err := refuseTenantField(r, "tenant", req.Tenant); err != nil {
		return err
	}
	req.Tenant = tenantOf(r, req.Tenant)
	if t := bytes.TrimLeft(req.Input, " \t\r\n"); len(t) == 0 || string(t) == "null" {
		req.Input = json.RawMessage(`{}`)
	} else if t[0] != '{' {
		return refuse(http.StatusBadRequest, CodeInvalid, "input", "input: must be a JSON object")
	}
	// The api_call event rides with the attempt's record: one commit.
	r = withAudit(r, host.AuditAttempt)
	att, res, err := s.cfg.Dispatcher.Invoke(r.Context(), dispatch.InvokeRequest{Pack: req.Pack, Node: req.Node, Input: req.Input, Tenant: req.Tenant})
	if err != nil {
		var le *runtime.LoadError
		switch {
		case errors.Is(err, dispatch.ErrPackNotInstalled):
			return refuse(http.StatusNotFound, CodeNotFound, "pack", fmt.Sprintf("pack %q is not installed", req.Pack))
		case errors.Is(err, runtime.ErrUnknownNode) && req.Node == "":
			return refuse(http.StatusBadRequest, CodeInvalid, "node", "node: required: "+err.Error())
		case errors.Is(err, runtime.ErrUnknownNode):
			return refuse(http.StatusNotFound, CodeNotFound, "node", err.Error())
		case errors.As(err, &le):
			return refuse(http.StatusUnprocessableEntity, CodeModuleRefused, "", le.Error())
		case errors.Is(err, dispatch.ErrInputRefused):
			// The refused attempt is recorded; the Invoker may return it
			// (a bare Dispatcher) or not (the Host): its id is the error's.
			field, attemptID := "input", ""
			if ie, ok := errors.AsType[*dispatch.InputError](err); ok {
				field, attemptID = strings.TrimSuffix("input."+ie.Path, "."), ie.AttemptID
			}
			s.recordCall(r, "", attemptID)
			return refuse(http.StatusUnprocessableEntity, CodeInputSchema, field, err.Error())
		}
		return err
	}
	s.recordCall(r, att.TaskID, att.AttemptID)
	events := att.Events
	if len(events) == 0 {
		events = json.RawMessage(`[]`)
	}
	reply(w, http.StatusOK, invokeResponse{
		AttemptID: att.AttemptID, Pack: att.Pack, Node: att.Node,
		Outcome: att.Outcome, Output: att.Output, Error: att.Error, Interrupt: att.Interrupt,
		Events: events, DurationMs: float64(res.Duration.Microseconds()) / 1000,
	})
	return nil
}

type packList struct {
	Packs []PackInfo `json:"packs"`
}

// listPacks is GET /v1/packs.
func (s *server) listPacks(w http.ResponseWriter, r *http.Request) error {
	list, err := s.packs(r)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, packList{list})
	return nil
}

type skillList struct {
	Skills []packs.InstalledSkill `json:"skills"`
}

// listSkills is GET /v1/skills.
func (s *server) listSkills(w http.ResponseWriter, r *http.Request) error {
	list := []packs.InstalledSkill{}
	if s.cfg.Skills != nil {
		got, err := s.cfg.Skills(r.Context())
		if err != nil {
			return err
		}
		list = append(list, got...)
	}
	reply(w, http.StatusOK, skillList{list})
	return nil
}

func (s *server) packs(r *http.Request) ([]PackInfo, error) {
	if s.cfg.Packs == nil {
		return []PackInfo{}, nil
	}
	list, err := s.cfg.Packs(r.Context())
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []PackInfo{}
	}
	return list, nil
}

// capabilities is GET /.well-known/packrun.
type capabilities struct {
	ABIVersions []string                `json:"abiVersions"`
	Namespaces  []runtime.NamespaceInfo `json:"namespaces"`
	Limits      runtime.LimitsInfo      `json:"limits"`
	MaxLimits   runtime.LimitsInfo      `json:"maxLimits"`
	Engine      string                  `json:"engine"`
	Packs       []string                `json:"packs"` // name@version
	Build       *buildinfo.Info         `json:"build,omitempty"`
}

func (s *server) wellKnown(w http.ResponseWriter, r *http.Request) error {
	list, err := s.packs(r)
	if err != nil {
		return err
	}
	h := s.cfg.Host
	c := capabilities{ABIVersions: h.ABIVersions, Namespaces: h.Namespaces, Limits: h.Limits, MaxLimits: h.MaxLimits, Engine: h.Engine, Packs: make([]string, 0, len(list)), Build: s.cfg.Build}
	if c.ABIVersions == nil {
		c.ABIVersions = []string{}
	}
	if c.Namespaces == nil {
		c.Namespaces = []runtime.NamespaceInfo{}
	}
	for _, p := range list {
		c.Packs = append(c.Packs, p.Ref())
	}
	reply(w, http.StatusOK, c)
	return nil
}
