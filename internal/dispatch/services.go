package dispatch

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// binding is what one attempt's services act for.
type binding struct {
	backend   host.Backend
	adapters  *adapters.Registry // nil: no adapters configured
	grants    packs.Grants
	config    json.RawMessage // the pack's configuration object, may be nil
	archive   *packs.Archive  // the pack's archive (asset_read); nil for a bare module
	tenant    string
	taskID    string
	attemptID string
	node      string // the node's typeId: a sensor's default sensor_id
	// bundle is what the task runs as (nil outside the queue): the
	// adapter and model of its calls, the artifact roles and result
	// policy it runs under.
	bundle *bundle
	// checkIntent checks a follow-up against the home (Config.CheckIntent).
	checkIntent func(context.Context, *host.TaskIntent) error
	// outbound performs http_request (Config.Outbound).
	outbound *outbound.Client
}

// followUpsAllowed reports whether the task's profile lets it stage
// follow-up tasks (result_policy.allow_follow_up_tasks).
func (b *binding) followUpsAllowed() bool {
	return b.bundle == nil || b.bundle.profile == nil || b.bundle.profile.ResultPolicy.AllowFollowUpTasks
}

// ExternalMessagesAllowed reports whether the task's profile lets it send
// external messages (result_policy.allow_external_messages); true outside
// the queue and without a profile.
func (b *binding) ExternalMessagesAllowed() bool {
	return b.bundle == nil || b.bundle.profile == nil || b.bundle.profile.ResultPolicy.AllowExternalMessages
}

// roleAllowed reports whether the task type lets its attempts store
// artifacts under role (artifact_roles; any when not set).
func (b *binding) roleAllowed(role string) bool {
	return b.bundle == nil || len(b.bundle.spec.ArtifactRoles) == 0 || slices.Contains(b.bundle.spec.ArtifactRoles, role)
}

// services implements runtime.Services for one attempt. Side effects that
// must wait for the attempt to be verified (follow-up tasks) are staged.
type services struct {
	b        binding
	redactor *evidence.Redactor

	mu           sync.Mutex
	staged       []host.TaskIntent
	sensorEvents []host.SensorEvent  // staged by sensor_emit
	messages     []host.MessageInput // staged by message_publish
	records      []json.RawMessage
	adapterCalls []*adapters.Call
	artifacts    []string
	// artifactNames are the names the attempt's artifacts were stored under.
	artifactNames []string
	// followUpsRefused counts follow-ups the result policy refused.
	followUpsRefused int

	// refused is set when the node's inputSchema refused the input, so
	// the guest never ran.
	refused *Violation

	// http is the invocation's outbound session, started by its first
	// http_request; breaches are the limits its requests hit.
	http     *outbound.Session
	breaches []runtime.Event
}

var _ runtime.Services = (*services)(nil)

func newServices(b binding) *services { return &services{b: b, redactor: evidence.NewRedactor()} }

// applyTaskOutcome adds what the node said in its response's taskOutcome
// (abi.TaskOutcome, already checked against its limits) to the outcome in
// settles the task with. Its follow_up_tasks join the ones staged with
// queue_enqueue, under the same grant and limits: one that is not a valid
// TaskIntent, or any without the queue grant, refuses them all (the task
// then fails, as Finish does for invalid staged ones). Its
// external_messages stay in the outbox, except agent messages in the
// publish form, which publishedMessages publishes instead.
func (s *services) applyTaskOutcome(in *host.FinishInput, o *abi.TaskOutcome) {
	if o == nil {
		return
	}
	if o.OperatorSummary != "" {
		in.Outcome.OperatorSummary = o.OperatorSummary
	}
	in.Outcome.FileChanges, in.Outcome.WorkflowSignal, in.Outcome.ExternalMessage = o.FileChanges, o.WorkflowSignal, outboxEntries(o.ExternalMessages)
	if len(o.FollowUpTasks) == 0 {
		return
	}
	if !s.b.grants.Allows(packs.ServiceQueue) {
		in.FollowUpsRefused = "taskOutcome.follow_up_tasks: the pack is not granted the queue service"
		return
	}
	intents := make([]host.TaskIntent, 0, len(o.FollowUpTasks))
	for i, raw := range o.FollowUpTasks {
		intent, err := host.DecodeIntent(host.WithSource(raw, "task:"+s.b.taskID))
		if err != nil {
			in.FollowUpsRefused = fmt.Sprintf("taskOutcome.follow_up_tasks[%d]: %v", i, err)
			return
		}
		intents = append(intents, intent)
	}
	in.Outcome.FollowUpTasks = intents
	in.FollowUps = append(in.FollowUps[:len(in.FollowUps):len(in.FollowUps)], intents...)
}

// statusOf maps host errors to ABI status codes.
func statusOf(err error) abi.Status {
	switch {
	case err == nil:
		return abi.StatusOK
	case errors.Is(err, host.ErrNotFound):
		return abi.StatusNotFound
	case errors.Is(err, host.ErrAccessDenied), errors.Is(err, adapters.ErrNotGranted), errors.Is(err, adapters.ErrUnknownAdapter):
		return abi.StatusAccessDenied
	case errors.Is(err, host.ErrTooLarge):
		return abi.StatusCapabilityBreach
	case errors.Is(err, host.ErrValidation), errors.Is(err, host.ErrConflict), errors.Is(err, adapters.ErrInvalidRequest):
		return abi.StatusValidation
	}
	return abi.StatusHostError
}

type memReq struct {
	Namespace  string          `json:"namespace"`
	Key        string          `json:"key"`
	Prefix     string          `json:"prefix"`
	Value      json.RawMessage `json:"value"`
	TTLSeconds int64           `json:"ttlSeconds"`
	Secret     bool            `json:"secret"`
}

func (s *services) Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte) {
	g := s.b.grants
	switch fn {
	case abi.HostMemoryGet, abi.HostMemoryPut, abi.HostMemoryDelete, abi.HostMemoryList:
		r, ok := decodeMemReq(req)
		if !ok || r.Namespace == "" {
			return abi.StatusValidation, nil
		}
		if !g.Allows(packs.ServiceMemory) || !g.AllowsMemoryNamespace(r.Namespace) {
			return abi.StatusAccessDenied, nil
		}
		return s.memory(ctx, fn, r)
	case abi.HostQueueEnqueue:
		if !g.Allows(packs.ServiceQueue) {
			return abi.StatusAccessDenied, nil
		}
		intent, err := host.DecodeIntent(host.WithSource(req, orDefault(prefixed("task:", s.b.taskID), "attempt:"+s.b.attemptID)))
		if err != nil {
			return abi.StatusValidation, nil
		}
		if !s.b.followUpsAllowed() {
			s.mu.Lock()
			s.followUpsRefused++
			s.mu.Unlock()
			return abi.StatusAccessDenied, mustJSON(map[string]string{"error": "result_policy.allow_follow_up_tasks is false for this task's profile"})
		}
		if s.b.checkIntent != nil {
			if err := s.b.checkIntent(ctx, &intent); err != nil {
				return abi.StatusValidation, mustJSON(map[string]string{"error": err.Error()})
			}
		}
		s.mu.Lock()
		if len(s.staged) >= host.MaxFollowUps {
			s.mu.Unlock()
			return abi.StatusCapabilityBreach, nil
		}
		s.staged = append(s.staged, intent)
		n := len(s.staged)
		s.mu.Unlock()
		return abi.StatusOK, mustJSON(map[string]int{"staged": n})
	case abi.HostSensorEmit:
		if !g.Allows(packs.ServiceSensors) {
			return abi.StatusAccessDenied, nil
		}
		return s.sensorEmit(ctx, req)
	case abi.HostMessagePublish:
		return s.messagePublish(ctx, req)
	case abi.HostAdapterInvoke:
		if !g.Allows(packs.ServiceAdapters) || s.b.adapters == nil {
			return abi.StatusAccessDenied, nil
		}
		var r struct {
			Adapter string          `json:"adapter"`
			Input   json.RawMessage `json:"input"`
		}
		if json.Unmarshal(req, &r) != nil {
			return abi.StatusValidation, nil
		}
		areq := adapters.Request{Input: r.Input, TaskID: s.b.taskID, AttemptID: s.b.attemptID}
		if b := s.b.bundle; b != nil && b.adapterID != "" {
			// The task's adapter (requested, or its type's or profile's
			// default) serves a call that names none, with its model.
			r.Adapter = orDefault(r.Adapter, b.adapterID)
			if r.Adapter == b.adapterID {
				areq.Model = b.model
			}
		}
		if r.Adapter == "" {
			return abi.StatusValidation, nil
		}
		call, err := s.b.adapters.Invoke(ctx, g.Adapters, r.Adapter, areq)
		if call != nil {
			s.mu.Lock()
			s.adapterCalls = append(s.adapterCalls, call)
			s.mu.Unlock()
		}
		if err != nil && call == nil {
			return statusOf(err), nil
		}
		return abi.StatusOK, mustJSON(map[string]any{"output": call.Response, "exit_status": call.ExitStatus, "exit_code": call.ExitCode, "error": call.Error})
	case abi.HostEvidenceRecord:
		if !g.Allows(packs.ServiceEvidence) {
			return abi.StatusAccessDenied, nil
		}
		s.mu.Lock()
		s.records = append(s.records, append(json.RawMessage(nil), req...))
		s.mu.Unlock()
		return abi.StatusOK, nil
	case abi.HostArtifactPut:
		if !g.Allows(packs.ServiceArtifacts) {
			return abi.StatusAccessDenied, nil
		}
		var r struct {
			Role        string  `json:"role"`
			Name        string  `json:"name"`
			ContentType string  `json:"content_type"`
			Text        *string `json:"text"`
			Base64      *string `json:"base64"`
		}
		if json.Unmarshal(req, &r) != nil {
			return abi.StatusValidation, nil
		}
		var data []byte
		switch {
		case r.Text != nil:
			data = []byte(*r.Text)
		case r.Base64 != nil:
			b, err := base64.StdEncoding.DecodeString(*r.Base64)
			if err != nil {
				return abi.StatusValidation, nil
			}
			data = b
		}
		if r.Role == "" {
			r.Role = "output"
		}
		if !s.b.roleAllowed(r.Role) {
			return abi.StatusAccessDenied, mustJSON(map[string]string{"error": "role " + r.Role + " is not among the task type's artifact_roles"})
		}
		a, err := s.b.backend.PutArtifact(ctx, host.ArtifactInput{TaskID: s.b.taskID, AttemptID: s.b.attemptID, Tenant: orDefault(s.b.tenant, host.DefaultTenant), Role: host.ArtifactRole(r.Role), Name: r.Name, ContentType: r.ContentType, Data: data})
		if err != nil {
			return statusOf(err), nil
		}
		s.mu.Lock()
		s.artifacts = append(s.artifacts, a.RelativePath)
		s.artifactNames = append(s.artifactNames, r.Name)
		s.mu.Unlock()
		return abi.StatusOK, mustJSON(map[string]string{"artifact_id": a.ArtifactID, "sha256": a.SHA256})
	case abi.HostConfigGet:
		if !g.Allows(packs.ServiceConfig) {
			return abi.StatusAccessDenied, nil
		}
		var r struct {
			Key string `json:"key"`
		}
		if json.Unmarshal(req, &r) != nil || r.Key == "" {
			return abi.StatusValidation, nil
		}
		var cfg map[string]json.RawMessage
		if json.Unmarshal(s.b.config, &cfg) != nil {
			return abi.StatusNotFound, nil
		}
		v, ok := cfg[r.Key]
		if !ok {
			return abi.StatusNotFound, nil
		}
		return abi.StatusOK, mustJSON(map[string]json.RawMessage{"value": v})
	case abi.HostAssetRead:
		return s.assetRead(req)
	case abi.HostHTTPRequest:
		return s.httpRequest(ctx, req)
	}
	return abi.StatusNotFound, nil
}

// sensorEmit stages a SensorEvent; it is applied when the attempt
// completes. Its sensor_id defaults to the node's typeId and may not name
// another node; a proposed_task's type must be served (else validation,
// at once, rather than an event refused later).
func (s *services) sensorEmit(ctx context.Context, req []byte) (abi.Status, []byte) {
	ev, err := host.DecodeSensorEvent(req, s.b.node)
	if err != nil {
		return statusOf(err), nil
	}
	if ev.SensorID != s.b.node {
		return abi.StatusValidation, nil
	}
	if pt := ev.ProposedTask; pt != nil {
		if _, err := s.b.backend.Resolve(context.WithoutCancel(ctx), pt.TaskType); errors.Is(err, host.ErrNotFound) {
			return abi.StatusValidation, nil
		} else if err != nil && !errors.Is(err, host.ErrConflict) {
			return statusOf(err), nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sensorEvents) >= host.MaxSensorEvents {
		return abi.StatusCapabilityBreach, nil
	}
	s.sensorEvents = append(s.sensorEvents, ev)
	return abi.StatusOK, mustJSON(map[string]any{"event_id": ev.EventID, "status": "staged", "staged": len(s.sensorEvents)})
}

// assetRead serves asset_read: {"path":P} names a file under the pack's
// own assets/ (no grant needed: a node reads its own pack). The answer is
// {"text":...} for UTF-8, {"base64":...} otherwise; a path that could
// leave assets/ is a validation error, a missing file not found (11), one
// over packs.MaxAssetBytes a capability breach.
func (s *services) assetRead(req []byte) (abi.Status, []byte) {
	var r struct {
		Path string `json:"path"`
	}
	if json.Unmarshal(req, &r) != nil || r.Path == "" {
		return abi.StatusValidation, nil
	}
	if s.b.archive == nil {
		return abi.StatusNotFound, nil
	}
	data, ok, err := s.b.archive.Asset(r.Path)
	switch {
	case err != nil:
		return abi.StatusValidation, nil
	case !ok:
		return abi.StatusNotFound, nil
	case len(data) > packs.MaxAssetBytes:
		return abi.StatusCapabilityBreach, nil
	case utf8.Valid(data):
		return abi.StatusOK, mustJSON(map[string]string{"text": string(data)})
	}
	return abi.StatusOK, mustJSON(map[string]string{"base64": base64.StdEncoding.EncodeToString(data)})
}

func (s *services) memory(ctx context.Context, fn string, r memReq) (abi.Status, []byte) {
	scope := host.Scope{Tenant: s.b.tenant, Namespace: r.Namespace}
	// Point reads do not take the invocation's deadline: go-sqlite3 watches
	// a cancellable context with a goroutine per statement, which costs more
	// than the query. The deadline still bounds the guest around the call.
	rctx := context.WithoutCancel(ctx)
	m := s.b.backend
	switch fn {
	case abi.HostMemoryGet:
		e, err := m.Get(rctx, scope, r.Key)
		if err != nil {
			return statusOf(err), nil
		}
		if e.Secret {
			s.redactor.Add(r.Namespace+"/"+r.Key, e.Value)
		}
		// {"value":<stored JSON>}: the value is valid JSON as stored.
		resp := make([]byte, 0, len(`{"value":}`)+len(e.Value))
		resp = append(append(append(resp, `{"value":`...), e.Value...), '}')
		return abi.StatusOK, resp
	case abi.HostMemoryPut:
		if len(r.Value) == 0 {
			return abi.StatusValidation, nil
		}
		if r.Secret {
			s.redactor.Add(r.Namespace+"/"+r.Key, r.Value)
		}
		return statusOf(m.Put(ctx, scope, r.Key, r.Value, host.PutOptions{TTL: time.Duration(r.TTLSeconds) * time.Second, Secret: r.Secret})), nil
	case abi.HostMemoryDelete:
		return statusOf(m.Delete(ctx, scope, r.Key)), nil
	default:
		keys, err := m.List(rctx, scope, r.Prefix)
		if err != nil {
			return statusOf(err), nil
		}
		if keys == nil {
			keys = []string{}
		}
		return abi.StatusOK, mustJSON(map[string][]string{"keys": keys})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}
