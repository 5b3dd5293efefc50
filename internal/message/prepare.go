// Prepare readies an agent message for the host's bus: it reads a
// request (which format, which document, which signature), decodes the
// document with its format's codec, checks the topic against the
// publisher's patterns, computes the message's canonical form (JCS, jcs.go)
// and hash, verifies the signature against the sender's registered key,
// and hands the store a host.MessageInput. Render writes a stored message
// in any format. No storage of its own.

package message

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/strictjson"
)

// Rules of the bus's own refusals (RuleError.Rule), beside the specs'.
const (
	RuleFormat       = "FORMAT_REQUIRED"     // the request names no known format
	RuleRequest      = "INVALID_REQUEST"     // the publish wrapper is malformed
	RuleTopic        = "TOPIC_NOT_ALLOWED"   // the publisher may not use the topic (HTTP 403)
	RuleSigRequired  = "SIGNATURE_REQUIRED"  // the sender has a key and the message no signature
	RuleSigInvalid   = "SIGNATURE_INVALID"   // the signature does not verify against the sender's key
	RuleSigMalformed = "SIGNATURE_MALFORMED" // the signature is not the base64 of 64 bytes
	// RuleSigUnverifiable: a signature that no registered key can check
	// (the sender is not a registered agent with a messaging key) is
	// refused, never stored unchecked.
	RuleSigUnverifiable = "SIGNATURE_UNVERIFIABLE"
)

// Profiles are the Content-Type profile values naming each format (the
// format's own name), e.g. "application/json; profile=bus-envelope".
func parseFormat(s string) (Format, bool) {
	f := Format(s)
	return f, slices.Contains(Formats, f)
}

func codec(f Format) Codec {
	switch f {
	case FormatEnvelope:
		return Envelope{}
	case FormatAgentMessage:
		return AgentMessage{}
	case FormatBus:
		return Bus{}
	}
	return nil
}

// Request is one message to publish, as a client or a module hands it
// over: its format, its wire document and (for formats that cannot carry
// one) its signature.
type Request struct {
	Format    Format
	Document  json.RawMessage
	Signature string
}

// wrapper is the publish form: {"format","message","signature"}.
type wrapper struct {
	Format    string          `json:"format"`
	Message   json.RawMessage `json:"message"`
	Signature string          `json:"signature,omitempty"`
}

func fail(f Format, path, rule, reason string) *RuleError {
	return &RuleError{Format: f, Path: path, Rule: rule, Reason: reason}
}

// formatHelp says how a request names its format.
const formatHelp = `name the format: Content-Type: application/json; profile=agent-envelope|agent-message|bus-envelope, or a body {"format":…,"message":{…}}`

// ParseRequest reads a publish request. A Content-Type whose profile
// parameter names a format makes body the document itself; otherwise
// body is the publish form {"format":F,"message":{…},"signature":"…"}.
// The format is never guessed from the document.
func ParseRequest(contentType string, body []byte) (*Request, error) {
	if len(body) > MaxBytes+4<<10 {
		return nil, fail("", "", RuleTooLarge, "request is larger than the message limit")
	}
	if contentType != "" {
		_, params, err := mime.ParseMediaType(contentType)
		if err == nil && params["profile"] != "" {
			f, ok := parseFormat(params["profile"])
			if !ok {
				return nil, fail("", "", RuleFormat, "unknown profile "+clip(params["profile"])+": "+formatHelp)
			}
			return &Request{Format: f, Document: body}, nil
		}
	}
	if err := strictjson.Check(body, 64); err != nil {
		return nil, fail("", "", RuleJSON, "not one JSON document: "+formatHelp)
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	var w wrapper
	if err := d.Decode(&w); err != nil {
		if name, ok := host.UnknownField(err); ok {
			return nil, fail("", "$."+clip(name), RuleRequest, "unknown field (the publish form is format, message, signature): "+formatHelp)
		}
		return nil, fail("", "", RuleRequest, "not the publish form: "+formatHelp)
	}
	if w.Format == "" {
		return nil, fail("", "$.format", RuleFormat, formatHelp)
	}
	f, ok := parseFormat(w.Format)
	if !ok {
		return nil, fail("", "$.format", RuleFormat, "unknown format "+clip(w.Format)+": "+formatHelp)
	}
	if len(w.Message) == 0 || w.Message[0] != '{' {
		return nil, fail(f, "$.message", RuleRequest, "must be the message document (a JSON object)")
	}
	return &Request{Format: f, Document: w.Message, Signature: w.Signature}, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Options say who publishes and under which policy.
type Options struct {
	Tenant string
	// Origin is "api", "cli", "task:<id>" or "outbox:<task id>"; By the
	// API caller (host.MessageInput.By).
	Origin, By string
	// Now is when the message is handed over (latency and ttl are
	// counted from the message's own time).
	Now time.Time
	// Direction is the MessageLog direction: "received" from outside,
	// "sent" by a task.
	Direction string
	// Topics, when not nil, are the patterns the publisher may use (a
	// pack's messages grant); any other topic is refused (RuleTopic).
	Topics []string
	// Identity returns the sender's registered messaging identity (nil,
	// nil when the sender is not a registered agent with one). An
	// identity with a key requires a valid signature; one with topics
	// limits the topics the sender may publish.
	Identity func(ctx context.Context, sender string) (*host.MessagingIdentity, error)
}

// Sender is the identity a message's chain and signature key belong to:
// the BlackRoad envelope schema's agent://<name> is <name>, the AgentOS
// message schema's agentId/instanceId is agentId, the AICO message
// formats' source is itself.
func Sender(m *Message) string { return m.Sender() }

// Hash is the lowercase hex SHA-256 of a canonical form.
func Hash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// Sign signs doc's canonical form with key: the standard base64 of the
// Ed25519 signature, as the BlackRoad envelope schema's signature property carries it.
func Sign(key ed25519.PrivateKey, doc []byte) (string, error) {
	c, err := Canonical(doc)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(ed25519.Sign(key, c)), nil
}

// SignEnvelope returns a BlackRoad envelope with its signature property set.
func SignEnvelope(key ed25519.PrivateKey, doc []byte) ([]byte, error) {
	sig, err := Sign(key, doc)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		return nil, err
	}
	m["signature"], _ = json.Marshal(sig)
	return json.Marshal(m)
}

// Prepare decodes r with its format's codec and makes it a MessageInput:
// a refusal is a *RuleError naming the JSON path and the rule.
// A message with a signature is accepted only when the signature
// verifies against its sender's registered key (SignedBy names it): a
// malformed one, or one no registered key can check, is refused. The
// sender chain and duplicates are the store's to check.
func Prepare(ctx context.Context, r *Request, o Options) (*host.MessageInput, error) {
	c := codec(r.Format)
	if c == nil {
		return nil, fail(r.Format, "", RuleFormat, formatHelp)
	}
	m, err := c.Decode(r.Document)
	if err != nil {
		return nil, err
	}
	if err := abi.CheckTopic(m.Topic); err != nil {
		return nil, fail(r.Format, topicPath(r.Format), RuleTopic, err.Error())
	}
	if o.Topics != nil && !abi.MatchAnyTopic(o.Topics, m.Topic) {
		return nil, fail(r.Format, topicPath(r.Format), RuleTopic, "topic "+m.Topic+" is not in the publisher's messages grant")
	}
	canon, err := Canonical(r.Document)
	if err != nil {
		return nil, fail(r.Format, "", RuleJSON, err.Error())
	}
	sig := m.Signature
	if r.Signature != "" {
		if sig != "" && sig != r.Signature {
			return nil, fail(r.Format, "$.signature", RuleSigMalformed, "the document and the request carry different signatures")
		}
		sig = r.Signature
	}
	if sig != "" {
		if _, err := sigBytes(sig); err != nil {
			return nil, fail(r.Format, "$.signature", RuleSigMalformed, err.Error())
		}
	}
	sender := Sender(m)
	var signedBy string
	if o.Identity != nil {
		id, err := o.Identity(ctx, sender)
		if err != nil {
			return nil, err
		}
		if id != nil {
			if id.Topics != nil && !abi.MatchAnyTopic(id.Topics, m.Topic) {
				return nil, fail(r.Format, topicPath(r.Format), RuleTopic, "agent "+sender+" may not publish topic "+m.Topic)
			}
			key, ok, err := id.Ed25519Key()
			if err != nil {
				return nil, err
			}
			if ok {
				if err := verify(r.Format, key, sig, canon, sender); err != nil {
					return nil, err
				}
				signedBy = sender
			}
		}
	}
	if sig != "" && signedBy == "" {
		// A signature nobody checked is not stored as if it were one
		// (RATIONALE.md, "Why is a signature that cannot be checked refused?").
		why := "agent " + sender + " has no registered messaging key to check it against: register the agent with its messaging.public_key, or send the message unsigned"
		if o.Identity == nil {
			why = "this publisher checks no agent keys: publish the message unsigned"
		}
		return nil, fail(r.Format, "$.signature", RuleSigUnverifiable, why)
	}
	m.Signature = sig
	model, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	// Compact, in the form a json.RawMessage marshals to (so the task
	// payload that embeds it costs no second pass); the codec has checked
	// it is valid.
	doc := evidence.CompactJSON(r.Document)
	in := &host.MessageInput{
		Tenant: o.Tenant, Origin: o.Origin, By: o.By, Format: string(r.Format), Document: doc, Model: model,
		Hash: Hash(canon), MessageID: m.ID, Sender: sender, To: m.To, Topic: m.Topic, Kind: m.Kind,
		ReplyTo: m.ReplyTo, Priority: m.Priority, PrevHash: m.PrevHash, SignedBy: signedBy,
		Log: messageLog(m, o),
	}
	if m.TTL > 0 {
		in.ExpiresAt = m.Time.Add(m.TTL)
	}
	return in, nil
}

func verify(f Format, key ed25519.PublicKey, sig string, canon []byte, sender string) error {
	if sig == "" {
		return fail(f, "$.signature", RuleSigRequired, "agent "+sender+" has a registered key: its messages must be signed (Ed25519 over the JCS form without signature)")
	}
	raw, err := sigBytes(sig)
	if err != nil {
		return fail(f, "$.signature", RuleSigMalformed, err.Error())
	}
	if !ed25519.Verify(key, canon, raw) {
		return fail(f, "$.signature", RuleSigInvalid, "does not verify against agent "+sender+"'s key over the message's canonical form")
	}
	return nil
}

// sigBytes decodes a signature: the standard base64 of 64 bytes.
func sigBytes(sig string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, errors.New("must be the standard base64 of a 64-byte Ed25519 signature, and is not base64")
	}
	if len(raw) != ed25519.SignatureSize {
		return nil, fmt.Errorf("must be the standard base64 of a 64-byte Ed25519 signature, and is %d bytes", len(raw))
	}
	return raw, nil
}

func topicPath(f Format) string {
	switch f {
	case FormatEnvelope:
		return "$.intent"
	case FormatAgentMessage:
		return "$.type"
	}
	return "$.metadata.message_type"
}

// messageLog fills the AgentOS message schema's MessageLog fields: latency from the
// message's time to now, the evidence count and confidence its payload or
// evidence carries.
func messageLog(m *Message, o Options) host.MessageLog {
	l := host.MessageLog{Direction: o.Direction, Status: "success"}
	if l.Direction == "" {
		l.Direction = "received"
	}
	if !m.Time.IsZero() && !o.Now.IsZero() && o.Now.After(m.Time) {
		l.LatencyMs = o.Now.Sub(m.Time).Milliseconds()
	}
	var ev struct {
		Sources    []json.RawMessage `json:"sources"`
		Confidence *float64          `json:"confidence"`
	}
	if raw, ok := m.Extra["evidence"]; ok && json.Unmarshal(raw, &ev) == nil {
		l.EvidenceCount, l.Confidence = len(ev.Sources), ev.Confidence
	}
	// The payload's own confidence and evidence list, when it has them
	// (the AICO message formats' payloads carry a confidence).
	var p struct {
		Confidence    *float64          `json:"confidence"`
		EvidenceChain []json.RawMessage `json:"evidence_chain"`
		Evidence      []json.RawMessage `json:"evidence"`
	}
	mentions := bytes.Contains(m.Payload, []byte(`"confidence"`)) || bytes.Contains(m.Payload, []byte(`"evidence`))
	if mentions && json.Unmarshal(m.Payload, &p) == nil {
		if l.Confidence == nil && p.Confidence != nil {
			l.Confidence = p.Confidence
		}
		if l.EvidenceCount == 0 {
			l.EvidenceCount = max(len(p.EvidenceChain), len(p.Evidence))
		}
	}
	return l
}

// Render writes a stored message in format f: its own format gives back
// the document as accepted; another is converted from the model, and lost
// lists what f cannot carry.
func Render(rec *host.MessageRecord, f Format) (doc []byte, lost []string, err error) {
	if string(f) == rec.Format {
		return rec.Document, nil, nil
	}
	c := codec(f)
	if c == nil {
		return nil, nil, fail(f, "", RuleFormat, "unknown format: want agent-envelope, agent-message or bus-envelope")
	}
	var m Message
	if err := json.Unmarshal(rec.Model, &m); err != nil {
		return nil, nil, err
	}
	return c.Encode(&m)
}

// CodecOf returns the codec of f (nil for an unknown format).
func CodecOf(f Format) Codec { return codec(f) }

// ParseFormat names a format by its name.
func ParseFormat(s string) (Format, bool) { return parseFormat(s) }

// Store is what Accept needs of a backend: the bus's store and the
// registered agents (their messaging identities).
type Store interface {
	host.Messages
	Agent(ctx context.Context, agentID string) (*host.AgentRecord, error)
}

// AgentIdentity returns Options.Identity backed by st's registered agents.
func AgentIdentity(st Store) func(context.Context, string) (*host.MessagingIdentity, error) {
	return func(ctx context.Context, sender string) (*host.MessagingIdentity, error) {
		rec, err := st.Agent(ctx, sender)
		if errors.Is(err, host.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return rec.Messaging, nil
	}
}

// Accept prepares r (Prepare; Options.Identity defaults to st's agents)
// and publishes it.
func Accept(ctx context.Context, st Store, r *Request, o Options) (*host.MessageReceipt, error) {
	if o.Identity == nil {
		o.Identity = AgentIdentity(st)
	}
	in, err := Prepare(ctx, r, o)
	if err != nil {
		return nil, err
	}
	return st.PublishMessage(ctx, in)
}
