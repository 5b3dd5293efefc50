package message

import (
	"crypto/sha256"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/packrun/packrun/internal/strictjson"
)

// Envelope is the codec of the BlackRoad envelope schema, the agent message envelope JSON
// Schema (draft-07). Decode checks every keyword of that schema, written
// out in Go (see RATIONALE.md, "Agent messages: the spec codecs"); a
// refusal's Rule is the schema keyword at fault ("required", "type",
// "pattern", "enum", "format", "minimum", "maximum").
type Envelope struct{}

var _ Codec = Envelope{}

// Format is FormatEnvelope.
func (Envelope) Format() Format { return FormatEnvelope }

// The schema's patterns and enums, as written in the BlackRoad envelope schema.
var (
	envULID      = lazyRegexp(`^[0-9A-HJKMNP-TV-Z]{26}$`)
	envAgentURI  = lazyRegexp(`^agent://[a-z0-9-]+$`)
	envContextID = lazyRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$|^branch-[a-z0-9-]+$`)
	// envPrevHash is the schema's ^[a-f0-9]{64}$ widened to also take the
	// 66 characters of the spec's own example (RATIONALE.md).
	envPrevHash  = lazyRegexp(`^(?:[a-f0-9]{64}|[a-f0-9]{66})$`)
	envSignature = lazyRegexp(`^[A-Za-z0-9+/=]+$`)
	envIntents   = []string{"flag", "propose", "commit", "query", "heartbeat", "escalate", "ack"}
)

// envRequired is the schema's "required" list, in its order.
var envRequired = []string{"id", "ts", "from", "intent", "payload", "prev_truth_state"}

// envDefaultPriority is the schema's "default" for priority.
const envDefaultPriority = 5

// Decode validates b against the BlackRoad envelope schema and converts it.
func (c Envelope) Decode(b []byte) (*Message, error) {
	doc, err := parseObject(FormatEnvelope, b, "type")
	if err != nil {
		return nil, err
	}
	if err := c.validate(doc); err != nil {
		return nil, err
	}
	return envToMessage(doc), nil
}

func (Envelope) fail(path, rule, format string, a ...any) *RuleError {
	return refuse(FormatEnvelope, path, rule, format, a...)
}

// validate checks doc against every keyword of the schema.
func (c Envelope) validate(doc map[string]any) error {
	for _, k := range envRequired {
		if _, ok := doc[k]; !ok {
			return c.fail("$."+k, "required", "%s is required", k)
		}
	}
	checks := []struct {
		key string
		re  func() *regexp.Regexp
	}{{"id", envULID}, {"from", envAgentURI}, {"to", envAgentURI}, {"context_id", envContextID},
		{"prev_truth_state", envPrevHash}, {"signature", envSignature}}
	for _, ch := range checks {
		if err := c.pattern(doc, ch.key, ch.re()); err != nil {
			return err
		}
	}
	if err := CheckSenderID(strings.TrimPrefix(doc["from"].(string), "agent://")); err != nil {
		return refuse(FormatEnvelope, "$.from", RuleSenderID, "%v", err)
	}
	if err := c.stringTypes(doc); err != nil {
		return err
	}
	if p, ok := doc["payload"].(map[string]any); !ok || p == nil {
		return c.fail("$.payload", "type", "must be an object")
	}
	if err := c.emotional(doc); err != nil {
		return err
	}
	return c.integers(doc)
}

// pattern checks an optional string property against its pattern.
func (c Envelope) pattern(doc map[string]any, key string, re *regexp.Regexp) error {
	v, ok := doc[key]
	if !ok {
		return nil
	}
	if _, isStr := v.(string); !isStr {
		return c.fail("$."+key, "type", "must be a string")
	}
	if _, ok := match(v, re); !ok {
		return c.fail("$."+key, "pattern", "does not match %s", re.String())
	}
	return nil
}

// stringTypes checks ts (date-time) and intent (enum).
func (c Envelope) stringTypes(doc map[string]any) error {
	ts, ok := doc["ts"].(string)
	if !ok {
		return c.fail("$.ts", "type", "must be a string")
	}
	if _, ok := parseTime(ts); !ok {
		return c.fail("$.ts", "format", "must be an RFC 3339 date-time")
	}
	intent, ok := doc["intent"].(string)
	if !ok {
		return c.fail("$.intent", "type", "must be a string")
	}
	if !contains(envIntents, intent) {
		return c.fail("$.intent", "enum", "must be one of %v", envIntents)
	}
	return nil
}

// emotional checks the affective state vector.
func (c Envelope) emotional(doc map[string]any) error {
	v, ok := doc["emotional"]
	if !ok {
		return nil
	}
	e, ok := v.(map[string]any)
	if !ok {
		return c.fail("$.emotional", "type", "must be an object")
	}
	ranges := []struct {
		key      string
		min, max float64
	}{{"valence", -1, 1}, {"arousal", 0, 1}, {"dominance", -1, 1}}
	for _, r := range ranges {
		if x, ok := e[r.key]; ok {
			if err := c.inRange("$.emotional."+r.key, x, r.min, r.max); err != nil {
				return err
			}
		}
	}
	a, ok := e["affect"]
	if !ok {
		return nil
	}
	affect, ok := a.(map[string]any)
	if !ok {
		return c.fail("$.emotional.affect", "type", "must be an object")
	}
	for _, k := range sortedKeys(affect) {
		if err := c.inRange(strictjson.FieldPath("$.emotional.affect", k), affect[k], 0, 1); err != nil {
			return err
		}
	}
	return nil
}

// inRange checks a number against an inclusive minimum and maximum.
func (c Envelope) inRange(path string, v any, min, max float64) error {
	x, ok := number(v)
	if !ok {
		return c.fail(path, "type", "must be a number")
	}
	if x < min {
		return c.fail(path, "minimum", "must be at least %v", min)
	}
	if x > max {
		return c.fail(path, "maximum", "must be at most %v", max)
	}
	return nil
}

// integers checks trinary_state, priority and ttl.
func (c Envelope) integers(doc map[string]any) error {
	if v, ok := doc["trinary_state"]; ok {
		n, isInt := integral(v)
		if !isInt {
			return c.fail("$.trinary_state", "type", "must be an integer")
		}
		if n < -1 || n > 1 {
			return c.fail("$.trinary_state", "enum", "must be one of [-1 0 1]")
		}
	}
	if v, ok := doc["priority"]; ok {
		if _, isInt := integral(v); !isInt {
			return c.fail("$.priority", "type", "must be an integer")
		}
		if err := c.inRange("$.priority", v, 0, 10); err != nil {
			return err
		}
	}
	if v, ok := doc["ttl"]; ok {
		n, isInt := integral(v)
		if !isInt {
			return c.fail("$.ttl", "type", "must be an integer")
		}
		if n < 0 {
			return c.fail("$.ttl", "minimum", "must be at least 0")
		}
		if _, ok := seconds(n); !ok {
			return c.fail("$.ttl", "maximum", "must be at most %d seconds", int64(1<<63-1)/int64(time.Second))
		}
	}
	return nil
}

// envModelKeys are the properties the model holds; every other property
// (emotional, trinary_state, any the schema does not list) goes to Extra.
var envModelKeys = []string{"id", "ts", "from", "to", "intent", "context_id", "payload", "prev_truth_state", "signature", "priority", "ttl"}

// envToMessage converts a validated document.
func envToMessage(doc map[string]any) *Message {
	t, _ := parseTime(doc["ts"].(string))
	m := &Message{
		ID: doc["id"].(string), Time: t, From: doc["from"].(string),
		Kind: doc["intent"].(string), Topic: doc["intent"].(string),
		Payload:  rawJSON(doc["payload"]),
		PrevHash: doc["prev_truth_state"].(string), Priority: envDefaultPriority,
		Source: FormatEnvelope,
	}
	m.To, _ = doc["to"].(string)
	m.Signature, _ = doc["signature"].(string)
	if s, ok := doc["context_id"].(string); ok {
		m.ContextIDs = map[string]string{"context_id": s}
	}
	if p, ok := integer(doc["priority"]); ok {
		m.Priority = int(p)
	}
	if n, ok := integer(doc["ttl"]); ok {
		m.TTL, _ = seconds(float64(n))
	}
	for k, v := range doc {
		if !contains(envModelKeys, k) {
			if m.Extra == nil {
				m.Extra = map[string]json.RawMessage{}
			}
			m.Extra[k] = rawJSON(v)
		}
	}
	return m
}

// Encode renders m as a BlackRoad envelope. The result is checked with
// Decode. What the envelope has no room for is written as it can be and
// listed in lost: an id that is not a ULID (a UUID's 128 bits as the ULID
// of the same bits; any other id as a ULID of the message's time and its
// hash), a sender or recipient that is not an agent:// URI
// (agent://<agent>), a kind that is not an intent, a missing
// prev_truth_state (64 zeros).
func (c Envelope) Encode(m *Message) ([]byte, []string, error) {
	id, lost := envID(m)
	from, l := envURI("from", m.From)
	lost = append(lost, l...)
	doc := map[string]any{
		"id": id, "ts": m.Time.UTC().Format(time.RFC3339Nano), "from": from,
		"intent": envIntent(m), "prev_truth_state": m.PrevHash,
	}
	if m.PrevHash == "" {
		doc["prev_truth_state"] = envNoPrev
		lost = append(lost, "prev_truth_state (the message has none: written as 64 zeros)")
	}
	payload, err := decodeRaw(m.Payload)
	if err != nil {
		return nil, nil, c.fail("$.payload", "type", "the model's payload is not JSON")
	}
	doc["payload"] = payload
	if m.To != "" {
		to, l := envURI("to", m.To)
		doc["to"], lost = to, append(lost, l...)
	}
	setIf(doc, "signature", m.Signature)
	if m.Priority != envDefaultPriority {
		doc["priority"] = m.Priority
	}
	if m.TTL != 0 {
		doc["ttl"] = int64(m.TTL / time.Second)
		if m.TTL%time.Second != 0 {
			lost = append(lost, "ttl (fraction of a second)")
		}
	}
	lost = append(lost, envContext(doc, m)...)
	if m.Kind != "" && doc["intent"] != m.Kind {
		lost = append(lost, "kind ("+m.Kind+" written as intent "+doc["intent"].(string)+")")
	}
	if m.ReplyTo != "" {
		lost = append(lost, "reply_to")
	}
	if m.Topic != "" && m.Topic != doc["intent"] {
		lost = append(lost, "topic")
	}
	lost = append(lost, extraInto(doc, m, FormatEnvelope, envModelKeys)...)
	return checked(c, doc, SourceNames(m.Source, lost))
}

// envFromKind maps the AgentOS message schema's message types onto intents (RATIONALE.md);
// a type with no counterpart keeps its name and is refused by Decode.
var envFromKind = map[string]string{
	"query": "query", "response": "ack", "command": "commit", "event": "flag", "error": "escalate",
}

// envIntent is the intent a model's kind is written as: its own, the AgentOS
// message schema's counterpart (envFromKind), or, for a bus topic, escalate for a
// crisis and flag for anything else (listed as lost by the caller).
func envIntent(m *Message) string {
	if contains(envIntents, m.Kind) {
		return m.Kind
	}
	if i, ok := envFromKind[m.Kind]; ok {
		return i
	}
	if strings.HasPrefix(m.Kind, "crisis.") {
		return "escalate"
	}
	return "flag"
}

// envNoPrev is the prev_truth_state of an envelope written for a message
// that has none (the schema requires one).
var envNoPrev = strings.Repeat("0", 64)

// envID is the ULID an envelope's id is written as: the model's own if it
// is one; a UUID (the AgentOS message schema's, "msg-" prefixed or not) as the ULID of the
// same 128 bits (the reverse of the AgentOS message schema's ULID mapping); any other id as
// a ULID of the message's time and 80 bits of the id's SHA-256.
func envID(m *Message) (string, []string) {
	if envULID().MatchString(m.ID) {
		return m.ID, nil
	}
	var b [16]byte
	if u, ok := uuidBytes(strings.TrimPrefix(m.ID, "msg-")); ok {
		b = u
	} else {
		ms := uint64(max(m.Time.UnixMilli(), 0))
		for i := 0; i < 6; i++ {
			b[i] = byte(ms >> (8 * (5 - i)))
		}
		sum := sha256.Sum256([]byte(m.ID))
		copy(b[6:], sum[:10])
	}
	id := ulidOf(b)
	return id, []string{"id (" + m.ID + " written as ULID " + id + ")"}
}

// envURI writes a model sender or recipient as an agent:// URI: an
// agent://name as is; otherwise the agent (the AgentOS message schema's agentId, before
// "/") in the sender grammar (senderForm), with '_' and '.', which the
// URI does not allow, as '-'.
func envURI(field, s string) (string, []string) {
	if envAgentURI().MatchString(s) && (field != "from" || CheckSenderID(strings.TrimPrefix(s, "agent://")) == nil) {
		return s, nil
	}
	name, _, _ := strings.Cut(strings.TrimPrefix(s, "agent://"), "/")
	name = envURIName.Replace(senderForm(name))
	return "agent://" + name, []string{field + " (" + s + " written as agent://" + name + ")"}
}

var envURIName = strings.NewReplacer("_", "-", ".", "-")

// envContext writes context_id and lists the context ids it cannot carry.
func envContext(doc map[string]any, m *Message) []string {
	var lost []string
	for _, k := range sortedKeys(m.ContextIDs) {
		if k == "context_id" {
			doc[k] = m.ContextIDs[k]
			continue
		}
		lost = append(lost, "context_ids."+k)
	}
	return lost
}

// extraInto writes m.Extra back when m came from format f (skipping keys
// the model writes itself) and lists the extra fields of any other format
// as lost.
func extraInto(doc map[string]any, m *Message, f Format, modelKeys []string) []string {
	var lost []string
	for _, k := range sortedKeys(m.Extra) {
		if m.Source != f {
			lost = append(lost, "extra."+k)
			continue
		}
		if contains(modelKeys, k) {
			continue
		}
		if v, err := decodeRaw(m.Extra[k]); err == nil {
			doc[k] = v
		}
	}
	return lost
}

func setIf(doc map[string]any, k, v string) {
	if k != "" && v != "" {
		doc[k] = v
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
