package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/packrun/packrun/internal/strictjson"
)

// Bus is the codec of the AICO message formats: the bus envelope {metadata, payload}.
//
// Decode refuses anything but exactly those two members, a metadata of
// exactly message_id, timestamp, source, message_type and version (all
// required strings), and, for every topic the spec documents, a payload
// missing a field the spec describes, of the wrong type, outside a range
// the spec writes ("0.0-1.0 scale", "1-5 scale") or outside a closed enum
// (an enum the spec ends with "etc." is open: any non-empty string).
// Payload members the spec does not describe are accepted (its
// "Backward Compatibility" guideline). A topic the spec does not document
// is accepted with an opaque object payload: the spec defines its
// envelope as common to every bus message, refers to topics defined in
// other documents (personality.expression.decision 1.0) and leaves which
// topics a module may use to topic-level access control, which the bus
// enforces, not the codec.
//
// message_id: the spec says "uuid-string" but its own examples are not
// hexadecimal ("a1b2c3d4-e5f6-g7h8-i9j0-k1l2m3n4o5p6"); the rule kept is
// the UUID shape, groups of 8-4-4-4-12 ASCII letters or digits.
type Bus struct{}

// Format implements Codec.
func (Bus) Format() Format { return FormatBus }

var (
	busIDPattern      = lazyRegexp(`^[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{4}-[0-9A-Za-z]{12}$`)
	busTopicPattern   = lazyRegexp(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$`)
	busWord           = lazyRegexp(`^[a-z][a-z0-9_]*$`)
	busVersionPattern = lazyRegexp(`^[0-9]{1,4}\.[0-9]{1,4}$`)
	busMetadataFields = []string{"message_id", "timestamp", "source", "message_type", "version"}
)

// busMaxReason bounds the reason of a refusal so an error stays one short line.
const busMaxReason = 160

// Decode implements Codec.
func (b Bus) Decode(data []byte) (*Message, error) {
	if len(data) > MaxBytes {
		return nil, busErr("", "max_bytes", "message is %d bytes, the limit is %d", len(data), MaxBytes)
	}
	if !utf8.Valid(data) {
		return nil, busErr("", "utf-8", "not valid UTF-8")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil || top == nil {
		return nil, busErr("", "json", "not a JSON object")
	}
	if err := strictjson.Check(data, maxDepth); err != nil {
		var ce *strictjson.CheckError
		if errors.As(err, &ce) && errors.Is(ce.Err, strictjson.ErrDuplicateKey) {
			return nil, busErr(ce.Path, "duplicate_key", "member written twice")
		}
		return nil, busErr("", "json", "not valid JSON")
	}
	if err := busOnly("", top, "metadata", "payload"); err != nil {
		return nil, err
	}
	md, err := busMetadata(top["metadata"])
	if err != nil {
		return nil, err
	}
	payload, err := busPayload(top["payload"])
	if err != nil {
		return nil, err
	}
	v := &busObj{path: "$.payload", m: payload}
	busValidateTopic(md.Type, md.Version, v)
	if v.err != nil {
		return nil, v.err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, top["payload"]); err != nil {
		return nil, busErr("$.payload", "json", "not valid JSON")
	}
	m := &Message{
		ID:      md.ID,
		Time:    md.Time,
		From:    md.Source,
		Topic:   md.Type,
		Kind:    md.Type,
		Payload: json.RawMessage(compact.Bytes()),
		Source:  FormatBus,
		Extra:   map[string]json.RawMessage{"version": busQuote(md.Version)},
	}
	m.Priority, m.TTL, m.ContextIDs = busDerived(md, payload)
	return m, nil
}

// Encode implements Codec. The envelope carries no recipient, reply-to,
// signature or previous hash; priority, ttl and context ids are derived
// from the payload, so a message whose values differ from what its
// payload implies lists them in lost. The result is checked with Decode:
// a message the bus format cannot express (a topic without a dot, a
// payload missing its topic's fields) is refused.
func (b Bus) Encode(m *Message) ([]byte, []string, error) {
	if m == nil {
		return nil, nil, busErr("", "required", "no message")
	}
	var lost []string
	for _, f := range []struct {
		name string
		set  bool
	}{{"to", m.To != ""}, {"reply_to", m.ReplyTo != ""}, {"signature", m.Signature != ""}, {"prev_hash", m.PrevHash != ""}} {
		if f.set {
			lost = append(lost, f.name)
		}
	}
	id, l := busID(m.ID)
	lost = append(lost, l...)
	// The sender as its id (agent://name is name, agentId/instanceId is
	// agentId), in the sender grammar.
	source := senderForm(m.Sender())
	if source != m.From {
		lost = append(lost, "from ("+m.From+" written as source "+source+")")
	}
	version := "1.0"
	if m.Source == FormatBus {
		if raw, ok := m.Extra["version"]; ok {
			if err := json.Unmarshal(raw, &version); err != nil {
				return nil, nil, busErr("$.metadata.version", "type", "extra version is not a string")
			}
		}
	}
	for _, k := range sortedKeys(m.Extra) {
		if m.Source != FormatBus || k != "version" {
			lost = append(lost, "extra."+k)
		}
	}
	payload := bytes.TrimSpace(m.Payload)
	switch {
	case len(payload) == 0:
		payload = json.RawMessage("{}")
	case payload[0] != '{':
		// the AgentOS message schema's content may be a string or a list: the bus's payload
		// is an object.
		payload = append(append([]byte(`{"content":`), payload...), '}')
		lost = append(lost, "payload (written as {\"content\":…})")
	}
	topic := m.Topic
	if !busTopicPattern().MatchString(topic) && busWord().MatchString(topic) {
		// An intent or message type (no dot): a topic of the agent.
		topic = "agent." + topic
		lost = append(lost, "topic ("+m.Topic+" written as message_type "+topic+")")
	}
	doc := struct {
		Metadata busMeta         `json:"metadata"`
		Payload  json.RawMessage `json:"payload"`
	}{busMeta{ID: id, Timestamp: m.Time.Format(time.RFC3339Nano), Source: source, Type: topic, Version: version}, payload}
	// Without HTML escaping, so the payload's bytes (a "&" in a key, say)
	// come back as they went in.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, nil, busErr("$.payload", "json", "not valid JSON")
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	back, err := b.Decode(out)
	if err != nil {
		return nil, nil, err
	}
	if back.Priority != m.Priority {
		lost = append(lost, "priority")
	}
	if back.TTL != m.TTL {
		lost = append(lost, "ttl")
	}
	if !busSameIDs(back.ContextIDs, m.ContextIDs) {
		lost = append(lost, "context_ids")
	}
	return out, SourceNames(m.Source, lost), nil
}

// busID is the message_id a model id is written as: the model's own if
// it has the 8-4-4-4-12 shape; a BlackRoad envelope ULID as the UUID of its 128
// bits and the AgentOS message schema's "msg-" and a UUID as that UUID (so these are the
// ids ?format=agent-message writes, without "msg-"); any other id as a
// UUID of its SHA-256, so the same message always gets the same id.
func busID(id string) (string, []string) {
	if busIDPattern().MatchString(id) {
		return id, nil
	}
	u, ok := "", false
	if envULID().MatchString(id) {
		u, ok = ulidUUID(id)
	} else if rest, cut := strings.CutPrefix(id, "msg-"); cut && busIDPattern().MatchString(rest) {
		u, ok = rest, true
	}
	if !ok {
		sum := sha256.Sum256([]byte(id))
		h := hex.EncodeToString(sum[:16])
		u = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	}
	return u, []string{"id (" + id + " written as " + u + ")"}
}

// busMeta is the metadata as written on the wire.
type busMeta struct {
	ID        string `json:"message_id"`
	Timestamp string `json:"timestamp"`
	Source    string `json:"source"`
	Type      string `json:"message_type"`
	Version   string `json:"version"`
}

// busMetadataValue is the checked metadata.
type busMetadataValue struct {
	ID, Source, Type, Version string
	Time                      time.Time
}

func busMetadata(raw json.RawMessage) (busMetadataValue, error) {
	var md busMetadataValue
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return md, busErr("$.metadata", "type", "must be an object")
	}
	if err := busOnly("$.metadata", fields, busMetadataFields...); err != nil {
		return md, err
	}
	vals := make(map[string]string, len(busMetadataFields))
	for _, name := range busMetadataFields {
		path := "$.metadata." + name
		r, ok := fields[name]
		if !ok {
			return md, busErr(path, "required", "missing")
		}
		var s string
		if err := json.Unmarshal(r, &s); err != nil {
			return md, busErr(path, "type", "must be a string")
		}
		if s == "" {
			return md, busErr(path, "required", "empty")
		}
		vals[name] = s
	}
	md = busMetadataValue{ID: vals["message_id"], Source: vals["source"], Type: vals["message_type"], Version: vals["version"]}
	switch {
	case !busIDPattern().MatchString(md.ID):
		return md, busErr("$.metadata.message_id", "uuid-string", "%s is not 8-4-4-4-12 letters or digits", busShort(md.ID))
	case !busTopicPattern().MatchString(md.Type):
		return md, busErr("$.metadata.message_type", "topic.subtopic", "%s is not dot-separated lower-case segments", busShort(md.Type))
	case !busVersionPattern().MatchString(md.Version):
		return md, busErr("$.metadata.version", "version", "%s is not MAJOR.MINOR", busShort(md.Version))
	}
	if err := CheckSenderID(md.Source); err != nil {
		return md, busErr("$.metadata.source", RuleSenderID, "%v", err)
	}
	t, err := time.Parse(time.RFC3339Nano, vals["timestamp"])
	if err != nil {
		return md, busErr("$.metadata.timestamp", "date-time", "%s is not an RFC 3339 time", busShort(vals["timestamp"]))
	}
	md.Time = t
	return md, nil
}

func busPayload(raw json.RawMessage) (map[string]any, error) {
	if raw == nil {
		return nil, busErr("$.payload", "required", "missing")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil || p == nil {
		return nil, busErr("$.payload", "type", "must be an object")
	}
	return p, nil
}

func busPath(at []string) string { return "$" + strings.Join(at, "") }

// busOnly refuses members other than allowed.
func busOnly(path string, m map[string]json.RawMessage, allowed ...string) error {
	var extra []string
	for k := range m {
		if !busIn(k, allowed) {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return nil
	}
	sort.Strings(extra)
	return busErr(busJoin(path, extra[0]), "additional_property", "not a member of the bus envelope")
}

// busDerived computes the model's priority, ttl and context ids from a
// checked payload. Crisis topics come first (the AICO message formats, "Prioritization"):
// crisis.* is 8–10 (moderate, high, immediate; 10 without guidance),
// every other topic 0–7 (its 0.0–1.0 priority scaled to 7, the request's
// low/medium/high as 2/5/7, 5 without a priority).
func busDerived(md busMetadataValue, p map[string]any) (int, time.Duration, map[string]string) {
	ids := map[string]string{}
	for _, k := range []string{"crisis_id", "initiative_id", "coordination_id", "learning_event_id", "request_id", "conversation_id"} {
		if s, ok := p[k].(string); ok && s != "" {
			ids[k] = s
		}
	}
	if ctx, ok := p["context"].(map[string]any); ok {
		for _, k := range []string{"conversation_id", "user_id"} {
			if s, ok := ctx[k].(string); ok && s != "" {
				ids[k] = s
			}
		}
	}
	if len(ids) == 0 {
		ids = nil
	}
	var ttl time.Duration
	if timing, ok := p["timing"].(map[string]any); ok && md.Type == "agency.initiative" {
		if s, ok := timing["expiration_time"].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, s); err == nil && t.After(md.Time) {
				ttl = t.Sub(md.Time)
			}
		}
	}
	return busPriority(md.Type, p), ttl, ids
}

func busPriority(topic string, p map[string]any) int {
	if strings.HasPrefix(topic, "crisis.") {
		g, _ := p["response_guidance"].(map[string]any)
		switch g["priority"] {
		case "moderate":
			return 8
		case "high":
			return 9
		}
		return 10
	}
	if n, ok := p["priority"].(json.Number); ok {
		if f, err := n.Float64(); err == nil && f >= 0 && f <= 1 {
			return int(math.Round(f * 7))
		}
	}
	if rp, ok := p["response_parameters"].(map[string]any); ok {
		switch rp["priority"] {
		case "low":
			return 2
		case "high":
			return 7
		}
	}
	return 5
}

func busSameIDs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func busErr(path, rule, format string, args ...any) *RuleError {
	reason := fmt.Sprintf(format, args...)
	reason = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, reason)
	if len(reason) > busMaxReason {
		reason = reason[:busMaxReason] + "…"
	}
	return &RuleError{Format: FormatBus, Path: path, Rule: rule, Reason: reason}
}

// busShort quotes a wire value for an error, cut to a bounded length.
func busShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func busQuote(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func busIn(s string, list []string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func busJoin(path, name string) string {
	if path == "" {
		path = "$"
	}
	return strictjson.FieldPath(path, name)
}
