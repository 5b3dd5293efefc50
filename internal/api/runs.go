package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/packrun/packrun/host"
)

// RunService serves openwop's run API (the Host, runs.go).
type RunService interface {
	PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error
	StartRun(ctx context.Context, tenant, workflowID string, inputs json.RawMessage) (*host.Run, error)
	// StartRunOnce is StartRun under an Idempotency-Key: false when the
	// key answered the run it started before.
	StartRunOnce(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string) (*host.Run, bool, error)
	// StartRunWith is StartRunOnce (key "": none) with the run's options.
	StartRunWith(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string, opts host.RunOptions) (*host.Run, bool, error)
	GetRun(ctx context.Context, tenant, runID string) (*host.Run, error)
	RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error)
	CancelRun(ctx context.Context, tenant, runID, reason string) (*host.Run, error)
	ForkRun(ctx context.Context, tenant, runID, mode string, fromSeq int) (*host.Run, error)
	// OpenwopFixtures lists the conformance fixtures runnable here.
	OpenwopFixtures(ctx context.Context) ([]string, error)
	// OpenwopRegistered lists the ids of a tenant's registered workflow
	// definitions runnable here.
	OpenwopRegistered(ctx context.Context, tenant string) ([]string, error)
	// OpenwopLoadedPacks lists the names of the packs loaded (installed).
	OpenwopLoadedPacks(ctx context.Context) ([]string, error)
	Interrupts
}

// wasmRuntime is discovery's nodePackRuntimes.wasm (RFC 0008 §H).
type wasmRuntime struct {
	Supported      bool     `json:"supported"`
	ABIVersions    []int    `json:"abiVersions"`
	Engine         string   `json:"engine"`
	EngineVersion  string   `json:"engineVersion"`
	MaxMemoryBytes uint64   `json:"maxMemoryBytes"`
	MaxExecutionMs int64    `json:"maxExecutionMs"`
	LoadedPacks    []string `json:"loadedPacks"`
}

// discoveryLimits is discovery's limits (openwop capabilities.md §3, the
// CapabilityLimiter shape): packrun runs no LLM envelope exchanges, so
// the three envelope limits are 0 (none allowed), as its empty
// supportedEnvelopes says.
type discoveryLimits struct {
	ClarificationRounds int `json:"clarificationRounds"`
	SchemaRounds        int `json:"schemaRounds"`
	EnvelopesPerTurn    int `json:"envelopesPerTurn"`
}

// openwopProtocolVersion is the openwop protocol version served.
const openwopProtocolVersion = "1.0"

// discoveryCacheControl lets clients cache discovery briefly: it changes
// when a pack is installed, and is the same for every caller.
const discoveryCacheControl = "public, max-age=60"

type nodePackRuntimes struct {
	Wasm wasmRuntime `json:"wasm"`
}

// openwopDiscovery is GET /.well-known/openwop: the four fields openwop's
// capabilities.md §3 requires, capability families at the document's
// root (openwop RFC 0073), mirrored under capabilities for older
// clients, and the fixtures runnable here. It is served without a token
// and holds nothing tenant-scoped.
type openwopDiscovery struct {
	ProtocolVersion    string            `json:"protocolVersion"`
	SupportedEnvelopes []string          `json:"supportedEnvelopes"`
	SchemaVersions     map[string]int    `json:"schemaVersions"`
	Limits             discoveryLimits   `json:"limits"`
	Implementation     map[string]string `json:"implementation"`
	NodePackRuntimes   nodePackRuntimes  `json:"nodePackRuntimes"`
	Capabilities       struct {
		NodePackRuntimes nodePackRuntimes `json:"nodePackRuntimes"`
		Packs            *packsCaps       `json:"packs,omitempty"`
	} `json:"capabilities"`
	Fixtures []string `json:"fixtures"`
	// Replay and Auth: what else is served, in openwop's terms (advertise.go).
	Replay replayCaps `json:"replay"`
	Auth   *authCaps  `json:"auth,omitempty"`
	// Agents: openwop's agent memory (openwopmemory.go).
	Agents *agentsCaps `json:"agents,omitempty"`
	// Packs: the pack registry read API (openwopregistry.go).
	Packs *packsCaps `json:"packs,omitempty"`
}

// runHandler is a handler of the run API, handed the RunService.
// runStartBody is the body of POST /v1/runs.
type runStartBody struct {
	WorkflowID   string           `json:"workflowId"`
	Inputs       json.RawMessage  `json:"inputs"`
	Configurable *runConfigurable `json:"configurable,omitempty"`
}

// runConfigurable is openwop's RunOptions.configurable: the overlay
// packrun honours (recursionLimit); another key is refused, naming it.
type runConfigurable struct {
	RecursionLimit *int `json:"recursionLimit,omitempty"`
}

// UnmarshalJSON decodes c strictly, naming an unknown key by its path
// (configurable.KEY): encoding/json names a nested field by its key only.
func (c *runConfigurable) UnmarshalJSON(b []byte) error {
	type plain runConfigurable
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		if f, ok := host.UnknownField(err); ok {
			f = "configurable." + f
			return refuse(http.StatusBadRequest, CodeInvalid, f, f+": unknown field (packrun takes recursionLimit only)")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			f := "configurable." + te.Field
			return refuse(http.StatusBadRequest, CodeInvalid, f, fmt.Sprintf("%s: must be %s", f, jsonKind(te.Type.Kind().String())))
		}
		return err
	}
	*c = runConfigurable(p)
	return nil
}

// options are the run options body asks for.
func (b runStartBody) options() host.RunOptions {
	var o host.RunOptions
	if b.Configurable != nil && b.Configurable.RecursionLimit != nil {
		o.RecursionLimit = *b.Configurable.RecursionLimit
		if o.RecursionLimit == 0 {
			o.RecursionLimit = -1 // refused: 0 would read as no limit
		}
	}
	return o
}

// runStarted is the answer to POST /v1/runs.
type runStarted struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

// runEventList is the answer to GET /v1/runs/{id}/events.
type runEventList struct {
	Events []host.RunEvent `json:"events"`
}

// runActionBody is the body of POST /v1/runs/{id}:cancel and :fork.
type runActionBody struct {
	Reason  string          `json:"reason"`
	Mode    string          `json:"mode"`
	FromSeq int             `json:"fromSeq"`
	Overlay json.RawMessage `json:"runOptionsOverlay"`
}

// runForked is the answer to POST /v1/runs/{id}:fork.
type runForked struct {
	RunID       string `json:"runId"`
	SourceRunID string `json:"sourceRunId"`
	FromSeq     int    `json:"fromSeq"`
	Mode        string `json:"mode"`
	Status      string `json:"status"`
	EventsURL   string `json:"eventsUrl"`
}

type runHandler func(w http.ResponseWriter, r *http.Request, rs RunService) error

// withRuns answers 503 when the server has no RunService.
func (s *server) withRuns(h runHandler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.cfg.Runs == nil {
			return refuse(http.StatusServiceUnavailable, CodeUnavailable, "", "openwop runs are not served by this server")
		}
		return h(w, r, s.cfg.Runs)
	}
}

// wellKnownOpenwop is GET /.well-known/openwop.
func (s *server) wellKnownOpenwop(w http.ResponseWriter, r *http.Request, rs RunService) error {
	loaded, err := rs.OpenwopLoadedPacks(r.Context())
	if err != nil {
		return err
	}
	fixtures, err := rs.OpenwopFixtures(r.Context())
	if err != nil {
		return err
	}
	cache := discoveryCacheControl
	if tenant, ok := s.discoveryTenant(r); ok {
		// Discovery is public; a caller with a valid token also sees its
		// tenant's registered definitions, an answer for it alone.
		reg, err := rs.OpenwopRegistered(r.Context(), tenant)
		if err != nil {
			return err
		}
		fixtures = appendNew(fixtures, reg)
		cache = discoveryPrivateCacheControl
	}
	w.Header().Set("Vary", "Authorization")
	h := s.cfg.Host
	// Engine is "wazero <version> <kind>".
	f := strings.Fields(h.Engine)
	wr := wasmRuntime{Supported: true, ABIVersions: []int{1}, Engine: "wazero", MaxMemoryBytes: h.Limits.MemoryBytes, MaxExecutionMs: h.Limits.TimeoutMs, LoadedPacks: loaded}
	if len(f) > 1 {
		wr.EngineVersion = strings.TrimPrefix(f[1], "v")
	}
	d := openwopDiscovery{ProtocolVersion: openwopProtocolVersion, SupportedEnvelopes: []string{}, SchemaVersions: map[string]int{},
		Implementation: map[string]string{"name": "packrun"}, NodePackRuntimes: nodePackRuntimes{wr}, Fixtures: fixtures}
	if s.cfg.Build != nil {
		d.Implementation["version"] = s.cfg.Build.Version
	}
	d.Capabilities.NodePackRuntimes = d.NodePackRuntimes
	if err := s.advertise(r.Context(), &d); err != nil {
		return err
	}
	w.Header().Set("Cache-Control", cache)
	reply(w, http.StatusOK, d)
	return nil
}

// putOpenwopWorkflow is POST /v1/openwop/workflows.
func (s *server) putOpenwopWorkflow(w http.ResponseWriter, r *http.Request, rs RunService) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	def, err := decodeOpenwopWorkflow(r, b)
	if err != nil {
		return err
	}
	def.Tenant = tenantOf(r, def.Tenant)
	if err := rs.PutOpenwopWorkflow(r.Context(), def); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusCreated, def)
	return nil
}

// startRun is POST /v1/runs.
func (s *server) startRun(w http.ResponseWriter, r *http.Request, rs RunService) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var body runStartBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	if _, ok := r.Header[idempotencyHeader]; ok {
		return s.startRunOnce(w, r, rs, body)
	}
	var run *host.Run
	if opts := body.options(); opts != (host.RunOptions{}) {
		run, _, err = rs.StartRunWith(r.Context(), tenantOf(r, ""), body.WorkflowID, body.Inputs, "", opts)
	} else {
		run, err = rs.StartRun(r.Context(), tenantOf(r, ""), body.WorkflowID, body.Inputs)
	}
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusCreated, runStarted{RunID: run.RunID, Status: run.Status})
	return nil
}

// getRun is GET /v1/runs/{id}.
func (s *server) getRun(w http.ResponseWriter, r *http.Request, rs RunService) error {
	run, err := rs.GetRun(r.Context(), tenantOf(r, ""), r.PathValue("id"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, run)
	return nil
}

// runEvents is GET /v1/runs/{id}/events.
// With Accept: text/event-stream it streams them (sse.go); ?streamMode=
// is checked first, whatever the Accept.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request, rs RunService) error {
	mode, err := streamMode(r)
	if err != nil {
		return err
	}
	if wantsEventStream(r) {
		return s.streamRunEvents(w, r, rs, mode)
	}
	evs, err := rs.RunEvents(r.Context(), tenantOf(r, ""), r.PathValue("id"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, runEventList{evs})
	return nil
}

// cancelRun is POST /v1/runs/{id}/cancel (also {id}:cancel).
func (s *server) cancelRun(w http.ResponseWriter, r *http.Request, rs RunService) error {
	return s.runActionOn(w, r, rs, r.PathValue("id"), "cancel")
}

// runAction is POST /v1/runs/{id}:fork or {id}:cancel.
func (s *server) runAction(w http.ResponseWriter, r *http.Request, rs RunService) error {
	seg := r.PathValue("id")
	i := strings.LastIndexByte(seg, ':')
	if i < 0 {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", "POST to a run needs an action: POST /v1/runs/{id}:fork or :cancel")
	}
	return s.runActionOn(w, r, rs, seg[:i], seg[i+1:])
}

func (s *server) runActionOn(w http.ResponseWriter, r *http.Request, rs RunService, id, action string) error {
	b, err := s.readOptionalObject(w, r)
	if err != nil {
		return err
	}
	var body runActionBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	tenant := tenantOf(r, "")
	switch action {
	case "cancel":
		run, err := rs.CancelRun(r.Context(), tenant, id, body.Reason)
		if err != nil {
			return err
		}
		s.recordCall(r, "", "")
		reply(w, http.StatusOK, run)
		return nil
	case "fork":
		// openwop spec/v1/replay.md: a replay takes no overlay.
		if o := strings.TrimSpace(string(body.Overlay)); o != "" && o != "null" && o != "{}" {
			return refuse(http.StatusBadRequest, CodeInvalid, "runOptionsOverlay", "runOptionsOverlay: must be omitted or empty for mode replay")
		}
		run, err := rs.ForkRun(r.Context(), tenant, id, body.Mode, body.FromSeq)
		if err != nil {
			return err
		}
		s.recordCall(r, "", "")
		reply(w, http.StatusCreated, runForked{RunID: run.RunID, SourceRunID: run.ForkedFrom, FromSeq: run.FromSeq,
			Mode: run.Mode, Status: run.Status, EventsURL: "/v1/runs/" + run.RunID + "/events"})
		return nil
	}
	return refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("unknown run action %q; the actions are fork and cancel", host.ShortName(action)))
}

// readOptionalObject reads a JSON object body that may be left out
// (Content-Length 0 reads as {}).
func (s *server) readOptionalObject(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength == 0 {
		return []byte(`{}`), nil
	}
	return s.readObject(w, r)
}
