package message

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/internal/strictjson"
)

// AgentMessage is the codec of the AgentOS runtime message schema.
// Decode checks the spec's six validation rules, the TypeScript types it
// declares and its confidence range; a refusal's Rule is the spec's error
// code (VALIDATION_FAILED, or UNAUTHORIZED for an agent id that is not
// known) and its Reason names the validation rule ("rule 2 (UUID
// format): ..."). Unknown fields are refused: the spec declares
// interfaces, not open objects.
type AgentMessage struct {
	// Agents, if set, reports whether an agent id exists (the spec's
	// AGENTOS_MANIFEST, rule 4); nil accepts any non-empty agent id.
	Agents func(agentID string) bool
}

var _ Codec = AgentMessage{}

// The spec's error codes used for refusals.
const (
	CodeValidationFailed = "VALIDATION_FAILED"
	CodeUnauthorized     = "UNAUTHORIZED"
)

// The spec's six validation rules, as named in refusals.
const (
	amRuleRequired   = "rule 1 (required fields)"
	amRuleUUID       = "rule 2 (UUID format)"
	amRuleTimestamp  = "rule 3 (timestamp format)"
	amRuleAgentIDs   = "rule 4 (agent ids)"
	amRuleEvidence   = "rule 5 (evidence chain)"
	amRuleConfidence = "rule 6 (confidence range)"
	amRuleTypes      = "message structure"
)

var (
	// amUUIDv4 is rule 2; amSeedID the spec's own example ids, "msg-" and
	// a UUID of any version (RATIONALE.md).
	amUUIDv4 = lazyRegexp(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$`)
	amSeedID = lazyRegexp(`^msg-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	// AgentMessageTypes are the spec's message types.
	AgentMessageTypes = []string{"query", "response", "command", "event", "error", "validation", "evidence", "gap", "correction"}
	amPriorities      = map[string]int{"high": 8, "normal": 5, "low": 2}
)

// amRequired is rule 1's list; amFields every field of the interface.
var (
	amRequired = []string{"id", "timestamp", "version", "from", "to", "type", "payload"}
	amFields   = append([]string{"replyTo", "context", "evidence", "priority", "ttl", "retryCount"}, amRequired...)
)

// amBroadcast is the identifier a broadcast (To == "") is written as: the
// spec has no broadcast and requires "to" (RATIONALE.md).
const amBroadcast = "*"

// Format is FormatAgentMessage.
func (AgentMessage) Format() Format { return FormatAgentMessage }

func amFail(path, rule, format string, a ...any) *RuleError {
	return refuse(FormatAgentMessage, path, CodeValidationFailed, rule+": "+format, a...)
}

// Decode validates b against the AgentOS message schema and converts it.
func (c AgentMessage) Decode(b []byte) (*Message, error) {
	doc, err := parseObject(FormatAgentMessage, b, CodeValidationFailed)
	if err != nil {
		return nil, err
	}
	if err := c.validate(doc); err != nil {
		return nil, err
	}
	return amToMessage(doc), nil
}

func (c AgentMessage) validate(doc map[string]any) error {
	if err := closed("$", doc, amFields); err != nil {
		return err
	}
	for _, k := range amRequired {
		if _, ok := doc[k]; !ok {
			return amFail("$."+k, amRuleRequired, "%s is required", k)
		}
	}
	id, ok := doc["id"].(string)
	if !ok {
		return amFail("$.id", amRuleUUID, "must be a string")
	}
	if !amUUIDv4().MatchString(id) && !amSeedID().MatchString(id) {
		return amFail("$.id", amRuleUUID, "must be a UUID v4 (or msg- and a UUID, as the seed's examples)")
	}
	if ts, ok := doc["timestamp"].(string); !ok {
		return amFail("$.timestamp", amRuleTimestamp, "must be a string")
	} else if _, ok := parseTime(ts); !ok {
		return amFail("$.timestamp", amRuleTimestamp, "must be ISO 8601 with a time zone (RFC 3339)")
	}
	steps := []func(map[string]any) error{c.identifiers, amHeader, amPayload, amContext, amEvidence, amControl}
	for _, step := range steps {
		if err := step(doc); err != nil {
			return err
		}
	}
	return nil
}

// closed refuses a field of obj that is not in fields.
func closed(path string, obj map[string]any, fields []string) error {
	for _, k := range sortedKeys(obj) {
		if !contains(fields, k) {
			return amFail(strictjson.FieldPath(path, k), amRuleTypes, "unknown field")
		}
	}
	return nil
}

// object returns doc[k] as an object with exactly the listed fields, the
// required ones present.
func object(doc map[string]any, path string, required, optional []string) (map[string]any, error) {
	o, ok := doc[lastKey(path)].(map[string]any)
	if !ok {
		return nil, amFail(path, amRuleTypes, "must be an object")
	}
	if err := closed(path, o, append(append([]string{}, required...), optional...)); err != nil {
		return nil, err
	}
	for _, k := range required {
		if _, ok := o[k]; !ok {
			return nil, amFail(path+"."+k, amRuleTypes, "%s is required", k)
		}
	}
	return o, nil
}

// identifiers checks from and to (rule 4).
func (c AgentMessage) identifiers(doc map[string]any) error {
	for _, k := range []string{"from", "to"} {
		o, err := object(doc, "$."+k, []string{"agentId", "instanceId"}, nil)
		if err != nil {
			return err
		}
		for _, f := range []string{"agentId", "instanceId"} {
			if s, ok := o[f].(string); !ok || s == "" {
				return amFail("$."+k+"."+f, amRuleAgentIDs, "must be a non-empty string")
			}
		}
		agent := o["agentId"].(string)
		if strings.Contains(agent, "/") {
			return amFail("$."+k+".agentId", amRuleAgentIDs, "must not contain /")
		}
		if k == "from" {
			if err := CheckSenderID(agent); err != nil {
				return refuse(FormatAgentMessage, "$.from.agentId", RuleSenderID, "%s: %v", amRuleAgentIDs, err)
			}
		}
		if c.Agents != nil && !(k == "to" && agent == amBroadcast) && !c.Agents(agent) {
			return refuse(FormatAgentMessage, "$."+k+".agentId", CodeUnauthorized, "%s: agent is not in the manifest", amRuleAgentIDs)
		}
	}
	return nil
}

// amHeader checks version, type and replyTo.
func amHeader(doc map[string]any) error {
	if s, ok := doc["version"].(string); !ok || s == "" {
		return amFail("$.version", amRuleTypes, "must be a non-empty string")
	}
	if t, ok := doc["type"].(string); !ok || !contains(AgentMessageTypes, t) {
		return amFail("$.type", amRuleTypes, "must be one of %v", AgentMessageTypes)
	}
	if v, ok := doc["replyTo"]; ok {
		if s, ok := v.(string); !ok || s == "" {
			return amFail("$.replyTo", amRuleTypes, "must be a non-empty string")
		}
	}
	return nil
}

// amPayload checks the MessagePayload.
func amPayload(doc map[string]any) error {
	p, err := object(doc, "$.payload", []string{"content", "format", "language", "encoding"}, nil)
	if err != nil {
		return err
	}
	enums := []struct {
		key    string
		values []string
	}{{"format", []string{"json", "text", "markdown"}}, {"language", []string{"en", "ar"}}, {"encoding", []string{"utf-8"}}}
	for _, e := range enums {
		if s, ok := p[e.key].(string); !ok || !contains(e.values, s) {
			return amFail("$.payload."+e.key, amRuleTypes, "must be one of %v", e.values)
		}
	}
	return nil
}

// amContextIDs are the context fields the model keeps as context ids.
var amContextIDs = []string{"sessionId", "userId", "requestId", "conversationId"}

// amContext checks the optional MessageContext.
func amContext(doc map[string]any) error {
	if _, ok := doc["context"]; !ok {
		return nil
	}
	o, err := object(doc, "$.context", []string{"sessionId", "requestId", "locale", "timezone"}, []string{"userId", "conversationId"})
	if err != nil {
		return err
	}
	for _, k := range sortedKeys(o) {
		if _, ok := o[k].(string); !ok {
			return amFail("$.context."+k, amRuleTypes, "must be a string")
		}
	}
	return nil
}

// amEvidence checks the EvidenceChain (rules 5 and 6).
func amEvidence(doc map[string]any) error {
	if _, ok := doc["evidence"]; !ok {
		if doc["type"] == "response" {
			return amFail("$.evidence", amRuleEvidence, "a response message must carry an evidence chain")
		}
		return nil
	}
	o, err := object(doc, "$.evidence", []string{"sources", "confidence", "citations", "provenance"}, nil)
	if err != nil {
		return err
	}
	for _, k := range []string{"sources", "citations", "provenance"} {
		list, ok := o[k].([]any)
		if !ok {
			return amFail("$.evidence."+k, amRuleTypes, "must be an array")
		}
		for i, item := range list {
			if _, ok := item.(map[string]any); !ok {
				return amFail(fmt.Sprintf("$.evidence.%s[%d]", k, i), amRuleTypes, "must be an object")
			}
		}
	}
	x, ok := number(o["confidence"])
	if !ok {
		return amFail("$.evidence.confidence", amRuleConfidence, "must be a number")
	}
	if x < 0 || x > 100 {
		return amFail("$.evidence.confidence", amRuleConfidence, "must be between 0 and 100")
	}
	return nil
}

// amControl checks priority, ttl and retryCount.
func amControl(doc map[string]any) error {
	if v, ok := doc["priority"]; ok {
		if _, ok := amPriorities[fmt.Sprint(v)]; !ok || !isString(v) {
			return amFail("$.priority", amRuleTypes, "must be high, normal or low")
		}
	}
	if v, ok := doc["ttl"]; ok {
		x, ok := number(v)
		if !ok {
			return amFail("$.ttl", amRuleTypes, "must be a number of seconds")
		}
		if _, ok := seconds(x); !ok {
			return amFail("$.ttl", amRuleTypes, "must be between 0 and %d seconds", int64(1<<63-1)/int64(time.Second))
		}
	}
	if v, ok := doc["retryCount"]; ok {
		if n, ok := integer(v); !ok || n < 0 {
			return amFail("$.retryCount", amRuleTypes, "must be a non-negative integer")
		}
	}
	return nil
}

func isString(v any) bool { _, ok := v.(string); return ok }

// amToMessage converts a validated document. The model's payload is the
// payload's content; its format, language and encoding, the context's
// locale and timezone, version, evidence and retryCount go to Extra under
// their JSON names ("payload.format", "context.locale", ...).
func amToMessage(doc map[string]any) *Message {
	t, _ := parseTime(doc["timestamp"].(string))
	kind := doc["type"].(string)
	p := doc["payload"].(map[string]any)
	m := &Message{
		ID: doc["id"].(string), Time: t, From: amIdent(doc["from"]), To: amIdent(doc["to"]),
		Kind: kind, Topic: kind, Payload: rawJSON(p["content"]), Priority: 5, Source: FormatAgentMessage,
		Extra: map[string]json.RawMessage{"version": rawJSON(doc["version"])},
	}
	if m.To == amBroadcast+"/"+amBroadcast {
		m.To = ""
	}
	m.ReplyTo, _ = doc["replyTo"].(string)
	for _, k := range []string{"format", "language", "encoding"} {
		m.Extra["payload."+k] = rawJSON(p[k])
	}
	if ctx, ok := doc["context"].(map[string]any); ok {
		m.ContextIDs = map[string]string{}
		for k, v := range ctx {
			if contains(amContextIDs, k) {
				m.ContextIDs[k] = v.(string)
			} else {
				m.Extra["context."+k] = rawJSON(v)
			}
		}
	}
	for _, k := range []string{"evidence", "retryCount"} {
		if v, ok := doc[k]; ok {
			m.Extra[k] = rawJSON(v)
		}
	}
	if s, ok := doc["priority"].(string); ok {
		m.Priority = amPriorities[s]
	}
	if x, ok := number(doc["ttl"]); ok {
		m.TTL, _ = seconds(x)
	}
	return m
}

// amIdent writes an AgentIdentifier as "agentId/instanceId".
func amIdent(v any) string {
	o := v.(map[string]any)
	return o["agentId"].(string) + "/" + o["instanceId"].(string)
}

// Encode renders m as an AgentOS AgentMessage; the result is checked with
// Decode: an id that is not a UUID (a ULID's bits, any other id's hash)
// and a kind that is not a message type (a bus topic is an event) are
// written as they can be and listed in lost; what still cannot be
// expressed is refused.
func (c AgentMessage) Encode(m *Message) ([]byte, []string, error) {
	var lost []string
	id, l := amID(m.ID)
	lost = append(lost, l...)
	doc := map[string]any{
		"id": id, "timestamp": m.Time.UTC().Format(time.RFC3339Nano),
		"from": amIdentifier(m.From), "to": amIdentifier(m.To),
		"version": "1.0.0", "priority": amPriorityName(m.Priority),
	}
	from := doc["from"].(map[string]any)
	if agent := from["agentId"].(string); CheckSenderID(agent) != nil {
		from["agentId"] = senderForm(agent)
		lost = append(lost, "from ("+m.From+" written as agentId "+from["agentId"].(string)+")")
	}
	if amPriorities[doc["priority"].(string)] != m.Priority {
		lost = append(lost, fmt.Sprintf("priority (%d written as %s)", m.Priority, doc["priority"]))
	}
	kind, l := amKind(m.Kind)
	doc["type"] = kind
	lost = append(lost, l...)
	if m.Topic != "" && m.Topic != kind {
		lost = append(lost, "topic")
	}
	content, err := decodeRaw(m.Payload)
	if err != nil {
		return nil, nil, amFail("$.payload.content", amRuleTypes, "the model's payload is not JSON")
	}
	payload := map[string]any{"content": content, "format": "json", "language": "en", "encoding": "utf-8"}
	doc["payload"] = payload
	setIf(doc, "replyTo", m.ReplyTo)
	if m.TTL != 0 {
		doc["ttl"] = jsonSeconds(m.TTL)
	}
	lost = append(lost, amContextInto(doc, m)...)
	lost = append(lost, amExtraInto(doc, payload, m)...)
	if m.Signature != "" {
		lost = append(lost, "signature")
	}
	if m.PrevHash != "" {
		lost = append(lost, "prev_hash")
	}
	if kind == "response" && doc["evidence"] == nil {
		doc["evidence"] = map[string]any{"sources": []any{}, "confidence": 0, "citations": []any{}, "provenance": []any{}}
	}
	return checked(c, doc, SourceNames(m.Source, lost))
}

// amID writes the model id as an AgentOS message id: a BlackRoad envelope ULID (128 bits)
// becomes "msg-" and the same bits as a UUID.
func amID(id string) (string, []string) {
	if amUUIDv4().MatchString(id) || amSeedID().MatchString(id) {
		return id, nil
	}
	if envULID().MatchString(id) {
		if u, ok := ulidUUID(id); ok {
			return "msg-" + u, []string{"id (ULID " + id + " written as msg-" + u + ")"}
		}
	}
	// Any other id (the AICO formats' ids are not hexadecimal): msg- and a UUID of
	// its SHA-256, so the same message always gets the same id.
	sum := sha256.Sum256([]byte(id))
	h := hex.EncodeToString(sum[:16])
	u := "msg-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	return u, []string{"id (" + id + " written as " + u + ")"}
}

// amIdentifier writes a model sender or recipient as an AgentIdentifier:
// "agentId/instanceId" as is; agent://name (the BlackRoad envelope schema) as agent name with
// one instance of the same name; "" (broadcast) as "*"/"*".
func amIdentifier(s string) map[string]any {
	if s == "" {
		return map[string]any{"agentId": amBroadcast, "instanceId": amBroadcast}
	}
	s = strings.TrimPrefix(s, "agent://")
	if a, i, ok := strings.Cut(s, "/"); ok {
		return map[string]any{"agentId": a, "instanceId": i}
	}
	return map[string]any{"agentId": s, "instanceId": s}
}

func amPriorityName(p int) string {
	switch {
	case p >= 7:
		return "high"
	case p <= 3:
		return "low"
	}
	return "normal"
}

// amFromIntent maps the BlackRoad envelope schema's intents onto message types (RATIONALE.md).
var amFromIntent = map[string]string{
	"query": "query", "ack": "response", "commit": "command", "propose": "command",
	"flag": "event", "heartbeat": "event", "escalate": "event",
}

func amKind(kind string) (string, []string) {
	if contains(AgentMessageTypes, kind) {
		return kind, nil
	}
	t, ok := amFromIntent[kind]
	if !ok {
		t = "event" // a bus topic: an event
	}
	return t, []string{"kind (" + kind + " written as type " + t + ")"}
}

// amContextInto writes the context when the model has one and lists the
// context ids the spec has no field for.
func amContextInto(doc map[string]any, m *Message) []string {
	var lost []string
	ctx := map[string]any{}
	for _, k := range sortedKeys(m.ContextIDs) {
		if contains(amContextIDs, k) {
			ctx[k] = m.ContextIDs[k]
		} else {
			lost = append(lost, "context_ids."+k)
		}
	}
	if len(ctx) > 0 || m.Source == FormatAgentMessage && m.ContextIDs != nil {
		doc["context"] = ctx
	}
	return lost
}

// amExtraInto writes back the Extra fields of an AgentOS message, and
// lists another format's as lost.
func amExtraInto(doc, payload map[string]any, m *Message) []string {
	if m.Source != FormatAgentMessage {
		return extraInto(doc, m, FormatAgentMessage, nil)
	}
	for _, k := range sortedKeys(m.Extra) {
		v, err := decodeRaw(m.Extra[k])
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(k, "payload."):
			payload[strings.TrimPrefix(k, "payload.")] = v
		case strings.HasPrefix(k, "context."):
			if ctx, ok := doc["context"].(map[string]any); ok {
				ctx[strings.TrimPrefix(k, "context.")] = v
			}
		case contains(amFields, k):
			doc[k] = v
		}
	}
	return nil
}

func lastKey(path string) string { return path[strings.LastIndex(path, ".")+1:] }
