// Package message is the agent message model of the three message specs (BlackRoad envelope, AgentOS, AICO):
// one normalised Message, and a codec per wire format that decodes
// strictly, validates what its spec says and converts to and from the
// model. A format is always named by the caller (Format), never guessed.
//
// Formats:
//   - FormatEnvelope (the BlackRoad envelope schema): the agent message envelope JSON Schema
//     (draft-07): ULID ids, agent:// URIs, seven intents, prev_truth_state,
//     an Ed25519 signature, priority 0–10, ttl.
//   - FormatAgentMessage (the AgentOS message schema): AgentMessage with {agentId,
//     instanceId} routing, eleven message types, a typed payload, a
//     session context, an evidence chain, six validation rules.
//   - FormatBus (the AICO message formats): the bus envelope {metadata, payload} with
//     topic-specific payloads.
package message

import (
	"encoding/json"
	"strings"
	"time"
)

// Format names a wire format.
type Format string

const (
	FormatEnvelope     Format = "agent-envelope" // the BlackRoad envelope schema
	FormatAgentMessage Format = "agent-message"  // the AgentOS message schema
	FormatBus          Format = "bus-envelope"   // the AICO message formats
)

// Formats lists every format, in spec order.
var Formats = []Format{FormatEnvelope, FormatAgentMessage, FormatBus}

// MaxBytes is the largest message any codec accepts.
const MaxBytes = 256 << 10

// Message is the normalised agent message every format converts to and
// from. Fields a format cannot carry stay zero when converting from it;
// Extra keeps, per format, the fields the model has no place for, so a
// message converted back to its own format loses nothing.
type Message struct {
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// From and To are the sender and the recipient, as the format writes
	// them (agent://name, "agentId/instanceId", a service name); To is
	// empty for a broadcast.
	From string `json:"from"`
	To   string `json:"to,omitempty"`
	// Topic is the bus topic (the AICO message formats) or, for formats without topics,
	// the intent (the BlackRoad envelope schema) or message type (the AgentOS message schema).
	Topic string `json:"topic"`
	// Kind is the format's own discriminator: the BlackRoad envelope schema's intent, the
	// AgentOS message schema's message type, the AICO message formats' topic.
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	ReplyTo string          `json:"reply_to,omitempty"`
	// ContextIDs are correlation and session ids (conversation, session,
	// correlation, causation...), by the name the format gives them.
	ContextIDs map[string]string `json:"context_ids,omitempty"`
	// Priority is normalised to 0 (lowest) … 10 (highest); the AgentOS message schema's
	// low/normal/high map to 2/5/8.
	Priority int `json:"priority"`
	// TTL is how long the message is deliverable; 0: no limit.
	TTL time.Duration `json:"ttl,omitempty"`
	// Signature is the sender's Ed25519 signature as the format carries
	// it (the BlackRoad envelope schema), PrevHash the hash of the sender's previous message
	// (the BlackRoad envelope schema's prev_truth_state).
	Signature string `json:"signature,omitempty"`
	PrevHash  string `json:"prev_hash,omitempty"`
	// Source is the format the message was decoded from.
	Source Format `json:"source"`
	// Extra holds the fields of Source the model has no place for.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Codec decodes and encodes one format.
type Codec interface {
	Format() Format
	// Decode checks b strictly against the format's spec and converts it.
	// A refusal is a *RuleError naming the JSON path and the spec rule.
	Decode(b []byte) (*Message, error)
	// Encode renders m in the format. Lost lists the model fields the
	// format cannot carry (not dropped silently: the caller reports them).
	Encode(m *Message) (b []byte, lost []string, err error)
}

// RuleError is a message refused by its spec's rules.
type RuleError struct {
	Format Format
	Path   string // JSON path of the value at fault ("" for the document)
	Rule   string // the spec's rule or error code, e.g. "MISSING_REQUIRED_FIELD"
	Reason string
}

func (e *RuleError) Error() string {
	p := e.Path
	if p == "" {
		p = "$"
	}
	if e.Format == "" { // refused before a format was known
		return p + ": " + e.Rule + ": " + e.Reason
	}
	return string(e.Format) + ": " + p + ": " + e.Rule + ": " + e.Reason
}

// sourceFieldNames are, per format, the names it gives the model's
// fields where they differ ("prev_hash" is the BlackRoad envelope schema's prev_truth_state).
var sourceFieldNames = map[Format]map[string]string{
	FormatEnvelope:     {"prev_hash": "prev_truth_state", "kind": "intent", "topic": "intent", "context_ids.context_id": "context_id"},
	FormatAgentMessage: {"reply_to": "replyTo", "kind": "type", "topic": "type"},
	FormatBus: {"id": "metadata.message_id", "from": "metadata.source", "kind": "metadata.message_type",
		"topic": "metadata.message_type", "extra.version": "metadata.version"},
}

// SourceNames writes each entry of an encoder's lost list ("field" or
// "field (what became of it)") with the field named as src, the format
// the message came from, names it: the BlackRoad envelope schema's prev_truth_state, the AgentOS
// message schema's replyTo and context.sessionId, an extra field by its own name.
// What the model derives (a bus message's priority, ttl and context ids)
// keeps the model's name. A field listed twice under one name (the BlackRoad
// envelope schema's intent is both kind and topic) is listed once.
func SourceNames(src Format, lost []string) []string {
	names := sourceFieldNames[src]
	var out []string
	seen := map[string]bool{}
	for _, entry := range lost {
		field, rest, _ := strings.Cut(entry, " (")
		name, ok := names[field]
		switch {
		case ok:
		case src == FormatAgentMessage && strings.HasPrefix(field, "context_ids."):
			name = "context." + strings.TrimPrefix(field, "context_ids.")
		case src != FormatBus && strings.HasPrefix(field, "extra."):
			name = strings.TrimPrefix(field, "extra.")
		default:
			name = field
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if rest != "" {
			name += " (" + rest
		}
		out = append(out, name)
	}
	return out
}
