//go:build wasip1

package packrun

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unsafe"
)

// Context is one invocation of a node: who is running it and the host
// services. It is valid only while the handler runs.
type Context struct {
	TypeID     string // the node being invoked
	RunID      string
	NodeID     string
	TenantID   string
	Attempt    int
	ABIVersion int
	// Configurable and Agent are passed through from the request envelope
	// (nil when absent).
	Configurable json.RawMessage
	Agent        json.RawMessage
}

// ---- openwop ----

// Log sends msg to the host log at level.
func (c *Context) Log(level Level, msg string) { openwopLog(int32(level), msg) }

// Logf formats like fmt.Sprintf and logs at level.
func (c *Context) Logf(level Level, format string, args ...any) {
	openwopLog(int32(level), fmt.Sprintf(format, args...))
}

// NowMs is the host clock in Unix milliseconds (recorded, so replays see the
// same value).
func (c *Context) NowMs() int64 { return openwopNowMs() }

// Now is NowMs as a time.Time.
func (c *Context) Now() time.Time { return time.UnixMilli(openwopNowMs()) }

// Random returns n bytes from the host's generator, seeded by (run, node,
// attempt) so that a replay sees the same bytes.
func (c *Context) Random(n int) ([]byte, error) {
	b := make([]byte, n)
	if n == 0 {
		return b, nil
	}
	if s := Status(openwopRandom(unsafe.Pointer(unsafe.SliceData(b)), int32(n))); s != StatusOK {
		return nil, &StatusError{Func: "openwop.openwop_random", Status: s}
	}
	return b, nil
}

// Variable returns the JSON value of run variable name, or ErrNotFound when
// it is unset.
func (c *Context) Variable(name string) (json.RawMessage, error) {
	v := takePacked(openwopVariableGet(name))
	if v == nil {
		return nil, &StatusError{Func: "openwop.openwop_variable_get", Status: StatusNotFound}
	}
	return v, nil
}

// SetVariable sets run variable name to value encoded as JSON.
func (c *Context) SetVariable(name string, value any) error {
	b, err := marshal(value)
	if err != nil {
		return err
	}
	return statusErr("openwop.openwop_variable_set", Status(openwopVariableSet(name, bytesString(b))))
}

// ReadChannel returns every value written to channel name so far, oldest
// first.
func (c *Context) ReadChannel(name string) ([]json.RawMessage, error) {
	b := takePacked(openwopChannelRead(name))
	if b == nil {
		return nil, nil
	}
	var vs []json.RawMessage
	if err := json.Unmarshal(b, &vs); err != nil {
		return nil, fmt.Errorf("packrun: openwop_channel_read: %w", err)
	}
	return vs, nil
}

// WriteChannel appends value, encoded as JSON, to channel name.
func (c *Context) WriteChannel(name string, value any) error {
	b, err := marshal(value)
	if err != nil {
		return err
	}
	return statusErr("openwop.openwop_channel_write", Status(openwopChannelWrite(name, bytesString(b))))
}

// Interrupt asks the host to suspend the run with payload (encoded as JSON)
// and returns the value it is resumed with. When the invocation has no
// resume value for this call, the host stops the module here (Interrupt does
// not return; deferred functions do not run) and reports the invocation as
// suspended; once resumed the node runs again from the start, and this call
// then returns the resume value. Code before it must therefore be safe to
// repeat. To suspend without waiting for a value, return Suspend(payload).
func (c *Context) Interrupt(payload any) (json.RawMessage, error) {
	b, err := marshal(payload)
	if err != nil {
		return nil, err
	}
	return takePacked(openwopInterrupt(bytesString(b))), nil
}

// ---- packrun:host/v1 ----

// call encodes req, calls f and decodes a response into resp (when not nil).
func (c *Context) call(name string, f hostFunc, req, resp any) error {
	b, err := marshal(req)
	if err != nil {
		return err
	}
	s, out := callHost(f, b)
	if s != StatusOK {
		return &StatusError{Func: "packrun:host/v1." + name, Status: s}
	}
	if resp == nil {
		return nil
	}
	if len(out) == 0 {
		return fmt.Errorf("packrun: %s: empty response", name)
	}
	if err := json.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("packrun: %s: %w", name, err)
	}
	return nil
}

type valueResp struct {
	Value json.RawMessage `json:"value"`
}

// MemoryGet reads a memory entry; ErrNotFound when it is absent or expired.
func (c *Context) MemoryGet(namespace, key string) (json.RawMessage, error) {
	var r valueResp
	err := c.call("memory_get", hostMemoryGet, struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
	}{namespace, key}, &r)
	return r.Value, err
}

// MemoryOption adjusts MemoryPut.
type MemoryOption func(*memoryPut)

type memoryPut struct {
	Namespace  string `json:"namespace"`
	Key        string `json:"key"`
	Value      any    `json:"value"`
	TTLSeconds int64  `json:"ttlSeconds,omitempty"`
	Secret     bool   `json:"secret,omitempty"`
}

// TTL makes the entry expire after d, rounded up to whole seconds; d <= 0
// means no expiry.
func TTL(d time.Duration) MemoryOption {
	return func(p *memoryPut) {
		p.TTLSeconds = 0
		if d > 0 {
			p.TTLSeconds = int64((d + time.Second - 1) / time.Second)
		}
	}
}

// Secret marks the entry secret: the host redacts its value from logs and
// evidence.
func Secret() MemoryOption { return func(p *memoryPut) { p.Secret = true } }

// MemoryPut writes value, encoded as JSON, to a memory entry.
func (c *Context) MemoryPut(namespace, key string, value any, opts ...MemoryOption) error {
	p := memoryPut{Namespace: namespace, Key: key, Value: value}
	for _, o := range opts {
		o(&p)
	}
	return c.call("memory_put", hostMemoryPut, &p, nil)
}

// MemoryDelete deletes a memory entry.
func (c *Context) MemoryDelete(namespace, key string) error {
	return c.call("memory_delete", hostMemoryDelete, struct {
		Namespace string `json:"namespace"`
		Key       string `json:"key"`
	}{namespace, key}, nil)
}

// MemoryList returns the keys of a namespace that start with prefix ("" for
// all).
func (c *Context) MemoryList(namespace, prefix string) ([]string, error) {
	var r struct {
		Keys []string `json:"keys"`
	}
	err := c.call("memory_list", hostMemoryList, struct {
		Namespace string `json:"namespace"`
		Prefix    string `json:"prefix,omitempty"`
	}{namespace, prefix}, &r)
	return r.Keys, err
}

// TaskIntent is a follow-up task for QueueEnqueue, with the commonly used
// fields of the host's TaskIntent; its source defaults to the current task.
// For other fields (priority, schedule, ...) pass a struct or map of your
// own to QueueEnqueue.
type TaskIntent struct {
	TaskType    string `json:"task_type"`
	Subject     string `json:"subject,omitempty"`
	Description string `json:"description,omitempty"`
	Payload     any    `json:"payload"`
}

// QueueEnqueue stages a follow-up task, enqueued only if this attempt
// completes. intent is a TaskIntent or any value that encodes to the host's
// TaskIntent JSON. It returns the number of tasks staged so far.
func (c *Context) QueueEnqueue(intent any) (int, error) {
	var r struct {
		Staged int `json:"staged"`
	}
	err := c.call("queue_enqueue", hostQueueEnqueue, intent, &r)
	return r.Staged, err
}

// AdapterResult is what adapter_invoke returns.
type AdapterResult struct {
	Output     json.RawMessage `json:"output"`
	ExitStatus string          `json:"exit_status"`
	ExitCode   *int            `json:"exit_code,omitempty"`
	Error      string          `json:"error,omitempty"`
}

// AdapterInvoke calls a granted adapter with input encoded as JSON.
func (c *Context) AdapterInvoke(adapter string, input any) (*AdapterResult, error) {
	var r AdapterResult
	err := c.call("adapter_invoke", hostAdapterInvoke, struct {
		Adapter string `json:"adapter"`
		Input   any    `json:"input"`
	}{adapter, input}, &r)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// EvidenceRecord adds a record of kind with data (encoded as JSON) to the
// attempt's evidence.
func (c *Context) EvidenceRecord(kind string, data any) error {
	return c.call("evidence_record", hostEvidenceRecord, struct {
		Kind string `json:"kind"`
		Data any    `json:"data"`
	}{kind, data}, nil)
}

// Artifact is a file to store with ArtifactPut. Exactly one of Text and
// Data is sent: Text when Data is nil.
type Artifact struct {
	Role        string // "output" when empty
	Name        string
	ContentType string
	Text        string
	Data        []byte // sent base64-encoded
}

// ArtifactRef identifies a stored artifact.
type ArtifactRef struct {
	ID     string `json:"artifact_id"`
	SHA256 string `json:"sha256"`
}

// ArtifactPut stores an artifact of the attempt.
func (c *Context) ArtifactPut(a Artifact) (ArtifactRef, error) {
	req := struct {
		Role        string  `json:"role,omitempty"`
		Name        string  `json:"name"`
		ContentType string  `json:"content_type,omitempty"`
		Text        *string `json:"text,omitempty"`
		Base64      *string `json:"base64,omitempty"`
	}{Role: a.Role, Name: a.Name, ContentType: a.ContentType}
	if a.Data != nil {
		s := base64.StdEncoding.EncodeToString(a.Data)
		req.Base64 = &s
	} else {
		req.Text = &a.Text
	}
	var r ArtifactRef
	err := c.call("artifact_put", hostArtifactPut, &req, &r)
	return r, err
}

// ConfigGet reads key of the pack's configuration; ErrNotFound when absent.
func (c *Context) ConfigGet(key string) (json.RawMessage, error) {
	var r valueResp
	err := c.call("config_get", hostConfigGet, struct {
		Key string `json:"key"`
	}{key}, &r)
	return r.Value, err
}

// MessageFormat is the format of an agent message: one of the three
// formats of the three message specs (BlackRoad envelope, AgentOS, AICO).
type MessageFormat string

// The message formats the host's bus accepts.
const (
	AgentEnvelope MessageFormat = "agent-envelope" // the BlackRoad envelope schema
	AgentMessage  MessageFormat = "agent-message"  // the AgentOS message schema
	BusEnvelope   MessageFormat = "bus-envelope"   // the AICO message formats
)

// Published is the host's answer to MessagePublish.
type Published struct {
	MessageID string `json:"message_id"`
	Hash      string `json:"hash"`   // hex SHA-256 of the canonical form
	Staged    int    `json:"staged"` // messages the attempt staged so far
}

// MessagePublish publishes an agent message (message, encoded as JSON, in
// format; signature, the Ed25519 signature, "" for none): it is staged and
// published only if this attempt completes. It needs ABI 1.2 (the pack
// declares "abi":{"version":1,"minor":2}) and the messages grant with the
// message's topic: a topic outside the grant is a *StatusError with
// StatusAccessDenied, a message its spec refuses one with StatusValidation.
// Only a module that calls it imports message_publish.
func (c *Context) MessagePublish(format MessageFormat, message any, signature string) (Published, error) {
	var r Published
	err := c.call("message_publish", hostMessagePublish, struct {
		Format    MessageFormat `json:"format"`
		Message   any           `json:"message"`
		Signature string        `json:"signature,omitempty"`
	}{format, message, signature}, &r)
	return r, err
}

// Emitted is the host's answer to SensorEmit.
type Emitted struct {
	EventID string `json:"event_id"`
	Staged  int    `json:"staged"` // events the attempt staged so far
}

// SensorEmit reports a SensorEvent (the agent runtime schema §5; event, encoded as JSON, is
// the whole request): it is staged and applied only if this attempt
// completes. sensor_id defaults to the node's typeId and may not name
// another node. It needs ABI 1.1 (the pack declares
// "abi":{"version":1,"minor":1}) and the sensors grant: without it the
// error is a *StatusError with StatusAccessDenied, an event the host
// refuses one with StatusValidation. Only a module that calls it imports
// sensor_emit.
func (c *Context) SensorEmit(event any) (Emitted, error) {
	var r Emitted
	err := c.call("sensor_emit", hostSensorEmit, event, &r)
	return r, err
}

func statusErr(fn string, s Status) error {
	if s == StatusOK {
		return nil
	}
	return &StatusError{Func: fn, Status: s}
}

// HTTPRequest makes an outbound HTTP request through the host. It needs ABI
// 1.3 (the pack declares "abi":{"version":1,"minor":3}) and an http grant
// naming the destination: the host resolves and checks the address, adds
// the grant's secrets (a bearer token, a header, a query parameter) on the
// way out and strips them from what the module sees. Any HTTP status is a
// response; a refusal is a *StatusError whose Message is the host's one-line
// reason: StatusAccessDenied (no grant for the destination or method, a
// refused address range, a redirect outside the grant), StatusValidation (a
// malformed request), StatusCapabilityBreach with Kind "http-requests",
// "http-request-bytes", "http-response-bytes" or "http-timeout", and
// StatusHostError (connection refused, DNS or TLS failure). Only a module
// that calls it imports http_request.
func (c *Context) HTTPRequest(req HTTPRequest) (*HTTPResponse, error) {
	b, err := encodeHTTPRequest(&req)
	if err != nil {
		return nil, fmt.Errorf("packrun: http_request: %w", err)
	}
	s, out := callHost(hostHTTPRequest, b)
	if s != StatusOK {
		return nil, httpError(s, out)
	}
	return decodeHTTPResponse(out)
}
