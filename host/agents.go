package host

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
	"strings"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host/schema"
)

// AgentIdentity is the agent runtime schema's AgentIdentity (§1), field names as
// written: the durable top-level agent. AgentID equals InternalName.
type AgentIdentity struct {
	AgentID           string           `json:"agent_id"`
	InternalName      string           `json:"internal_name"`
	ExternalName      *ExternalName    `json:"external_name,omitempty"`
	OnchainIdentity   *OnchainIdentity `json:"onchain_identity,omitempty"`
	DisplayName       string           `json:"display_name"`
	Codename          string           `json:"codename,omitempty"`
	PurposeRef        string           `json:"purpose_ref,omitempty"`
	SoulRef           string           `json:"soul_ref,omitempty"`
	Host              string           `json:"host,omitempty"`
	User              string           `json:"user,omitempty"`
	RuntimeInstanceID string           `json:"runtime_instance_id,omitempty"`
	Metadata          json.RawMessage  `json:"metadata,omitempty"`
}

// ExternalName is AgentIdentity.external_name.
type ExternalName struct {
	Name         string `json:"name"`
	RegisteredAt string `json:"registered_at,omitempty"`
	Source       string `json:"source"`
	WalletRef    string `json:"wallet_ref"`
}

// OnchainIdentity is AgentIdentity.onchain_identity.
type OnchainIdentity struct {
	Contract      string `json:"contract"`
	TokenID       string `json:"token_id,omitempty"`
	ReputationRef string `json:"reputation_ref,omitempty"`
}

// WalletIdentity is the agent runtime schema's WalletIdentity (§1a).
type WalletIdentity struct {
	AgentID                 string          `json:"agent_id"`
	Chain                   string          `json:"chain"`
	Network                 string          `json:"network,omitempty"`
	Address                 string          `json:"address"`
	PublicKey               string          `json:"public_key,omitempty"`
	Name                    string          `json:"name,omitempty"`
	Capabilities            []string        `json:"capabilities,omitempty"`
	OnchainIdentityContract string          `json:"onchain_identity_contract,omitempty"`
	ReputationRef           string          `json:"reputation_ref,omitempty"`
	Metadata                json.RawMessage `json:"metadata,omitempty"`
}

// AgentConstitution is the agent runtime schema's AgentConstitution (§1b). The hashes
// are "sha256:" and the hex SHA-256 of the files' content.
type AgentConstitution struct {
	AgentID     string `json:"agent_id"`
	SoulPath    string `json:"soul_path"`
	PurposePath string `json:"purpose_path"`
	SoulHash    string `json:"soul_hash"`
	PurposeHash string `json:"purpose_hash"`
	Version     string `json:"version"`
	RevisedAt   string `json:"revised_at"`
}

// Hash is the constitution hash a bundle pins: the SHA-256 of the agent,
// both content hashes and the version.
func (c *AgentConstitution) Hash() string {
	if c == nil {
		return ""
	}
	return ContentHash([]byte(strings.Join([]string{c.AgentID, c.SoulHash, c.PurposeHash, c.Version}, "\n")))
}

// ContentHash is "sha256:" and the hex SHA-256 of b.
func ContentHash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// AgentRecord is what `packrun agents add FILE` registers: one agent with
// its wallets and constitution, the shape of the FILE
// ({"agent":{...},"wallets":[...],"constitution":{...}}).
type AgentRecord struct {
	Agent        AgentIdentity      `json:"agent"`
	Wallets      []WalletIdentity   `json:"wallets,omitempty"`
	Constitution *AgentConstitution `json:"constitution,omitempty"`
	// Messaging, when set, is how the agent's messages are checked on the
	// bus: its key and the topics it may publish.
	Messaging *MessagingIdentity `json:"messaging,omitempty"`
}

// MessagingIdentity is an agent's identity on the message bus. The
// agent's messages are those whose sender (the BlackRoad envelope schema's agent://<name>,
// the AgentOS message schema's from.agentId, the AICO message formats' metadata.source) is its agent_id.
type MessagingIdentity struct {
	// PublicKey is the agent's Ed25519 public key: "ed25519:" and the
	// standard base64 of its 32 bytes. Every message of an agent with a
	// key must carry a valid signature (the BlackRoad envelope schema's Ed25519 signature over
	// the message's canonical form).
	PublicKey string `json:"public_key,omitempty"`
	// Topics are the topic patterns the agent may publish ("crisis.*",
	// "*"); empty: any topic.
	Topics []string `json:"topics,omitempty"`
}

// Ed25519Key decodes PublicKey; ok is false when there is none.
func (m *MessagingIdentity) Ed25519Key() (key ed25519.PublicKey, ok bool, err error) {
	if m == nil || m.PublicKey == "" {
		return nil, false, nil
	}
	b64, found := strings.CutPrefix(m.PublicKey, "ed25519:")
	if !found {
		return nil, false, fmt.Errorf(`must be "ed25519:" and the base64 of the key`)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, false, fmt.Errorf("must be the base64 of a %d-byte Ed25519 key", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), true, nil
}

// ContextPolicy is SubagentProfile.context_policy.
type ContextPolicy struct {
	MaxPromptChars      int  `json:"max_prompt_chars"`
	IncludeRecentMemory bool `json:"include_recent_memory"`
}

// ResultPolicy is SubagentProfile.result_policy.
type ResultPolicy struct {
	AllowFollowUpTasks    bool `json:"allow_follow_up_tasks"`
	AllowExternalMessages bool `json:"allow_external_messages"`
}

// SubagentProfile is the agent runtime schema's SubagentProfile (§3).
type SubagentProfile struct {
	ProfileID         string            `json:"profile_id"`
	Style             string            `json:"style"`
	Role              string            `json:"role"`
	DefaultAdapterID  string            `json:"default_adapter_id"`
	DefaultModel      string            `json:"default_model,omitempty"`
	PromptParts       []string          `json:"prompt_parts"`
	SkillIDs          []string          `json:"skill_ids"`
	ContextPolicy     ContextPolicy     `json:"context_policy"`
	ResultPolicy      ResultPolicy      `json:"result_policy"`
	IntegrationPolicy map[string]string `json:"integration_policy,omitempty"`
}

// Agents stores the home's agents and subagent profiles: configuration,
// not engine code (the agent runtime schema, principle 4).
type Agents interface {
	// PutAgent registers rec, replacing the agent with the same agent_id
	// (event agent_registered; data.replaced says which).
	PutAgent(ctx context.Context, rec *AgentRecord) (replaced bool, err error)
	// Agent returns one agent; ErrNotFound if none.
	Agent(ctx context.Context, agentID string) (*AgentRecord, error)
	// ListAgents returns every agent by agent_id.
	ListAgents(ctx context.Context) ([]AgentRecord, error)
	// PutProfile registers p, replacing the one with the same profile_id
	// (event profile_registered).
	PutProfile(ctx context.Context, p *SubagentProfile) (replaced bool, err error)
	// Profile returns one profile; ErrNotFound if none.
	Profile(ctx context.Context, profileID string) (*SubagentProfile, error)
	// ListProfiles returns every profile by profile_id.
	ListProfiles(ctx context.Context) ([]SubagentProfile, error)
}

// Events of the agent configuration.
const (
	EventAgentRegistered   = "agent_registered"
	EventProfileRegistered = "profile_registered"
)

// validateSchema validates doc against a published schema, as a
// validation error naming the field (prefix + the path at fault).
func validateSchema(op, id, prefix string, doc []byte) error {
	err := schema.Validate(id, doc)
	var se *schema.Error
	if !errors.As(err, &se) {
		return err
	}
	field := prefix
	if se.Path != "" {
		field = strings.TrimPrefix(prefix+"."+se.Path, ".")
	}
	return Invalid(op, field, "%s", se.Reason)
}

// strictDecode decodes b into v refusing unknown fields and trailing data.
func strictDecode(op string, b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := UnknownField(err); ok {
			return Invalid(op, name, "unknown field")
		}
		return Invalid(op, "", "not a JSON object of this record: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return Invalid(op, "", "trailing data after the JSON object")
	}
	return nil
}

// MaxConfigRecordBytes bounds an agent or profile file.
const MaxConfigRecordBytes = 1 << 20

// DecodeAgentRecord decodes an agent FILE ({"agent","wallets",
// "constitution"}) from untrusted bytes: each part is validated against
// its published schema, then the spec's invariants are checked (agent_id
// is internal_name; every wallet and the constitution belong to the agent;
// a wallet's onchain_identity_contract matches the agent's
// onchain_identity.contract). The constitution's hashes are checked
// against the files by the caller (it knows where they are).
func DecodeAgentRecord(b []byte) (*AgentRecord, error) {
	const op = "agent"
	if len(b) > MaxConfigRecordBytes {
		return nil, &Error{Op: op, Err: &reason{"file too large", ErrTooLarge}}
	}
	var parts struct {
		Agent        json.RawMessage   `json:"agent"`
		Wallets      []json.RawMessage `json:"wallets"`
		Constitution json.RawMessage   `json:"constitution"`
		Messaging    json.RawMessage   `json:"messaging"`
	}
	if err := strictDecode(op, b, &parts); err != nil {
		return nil, err
	}
	if len(parts.Agent) == 0 || string(parts.Agent) == "null" {
		return nil, Invalid(op, "agent", "required")
	}
	rec := &AgentRecord{}
	if err := decodePart(op, "agent-runtime/agent.identity/v1", "agent", parts.Agent, &rec.Agent); err != nil {
		return nil, err
	}
	a := &rec.Agent
	if a.AgentID != a.InternalName {
		return nil, Invalid(op, "agent.agent_id", "must equal internal_name (%q), the agent's canonical key", a.InternalName)
	}
	// The agent_id is the sender id of its messages: the one sender
	// grammar, so no registered agent has a look-alike.
	if err := CheckSenderID(a.AgentID); err != nil {
		return nil, Invalid(op, "agent.agent_id", "%v", err)
	}
	for i, w := range parts.Wallets {
		var wi WalletIdentity
		if err := decodePart(op, "agent-runtime/wallet.identity/v1", indexField("wallets", i), w, &wi); err != nil {
			return nil, err
		}
		if wi.AgentID != a.AgentID {
			return nil, Invalid(op, indexField("wallets", i)+".agent_id", "is %q, not the agent's %q", wi.AgentID, a.AgentID)
		}
		if c := wi.OnchainIdentityContract; c != "" && (a.OnchainIdentity == nil || a.OnchainIdentity.Contract != c) {
			return nil, Invalid(op, indexField("wallets", i)+".onchain_identity_contract", "%q does not match the agent's onchain_identity.contract", c)
		}
		rec.Wallets = append(rec.Wallets, wi)
	}
	if len(parts.Constitution) > 0 && string(parts.Constitution) != "null" {
		rec.Constitution = &AgentConstitution{}
		if err := decodePart(op, "agent-runtime/agent.constitution/v1", "constitution", parts.Constitution, rec.Constitution); err != nil {
			return nil, err
		}
		if rec.Constitution.AgentID != a.AgentID {
			return nil, Invalid(op, "constitution.agent_id", "is %q, not the agent's %q", rec.Constitution.AgentID, a.AgentID)
		}
	}
	if len(parts.Messaging) > 0 && string(parts.Messaging) != "null" {
		rec.Messaging = &MessagingIdentity{}
		if err := strictDecode(op, parts.Messaging, rec.Messaging); err != nil {
			return nil, Invalid(op, "messaging", "%v", err)
		}
		if _, _, err := rec.Messaging.Ed25519Key(); err != nil {
			return nil, Invalid(op, "messaging.public_key", "%v", err)
		}
		for i, p := range rec.Messaging.Topics {
			if err := abi.CheckTopicPattern(p); err != nil {
				return nil, Invalid(op, indexField("messaging.topics", i), "%v", err)
			}
		}
	}
	return rec, nil
}

func indexField(name string, i int) string {
	b, _ := json.Marshal(i)
	return name + "[" + string(b) + "]"
}

// decodePart validates part against schema id and decodes it into v.
func decodePart(op, id, field string, part []byte, v any) error {
	if err := validateSchema(op, id, field, part); err != nil {
		return err
	}
	return strictDecode(op, part, v)
}

// DecodeProfile decodes a SubagentProfile from untrusted bytes, validated
// against its published schema.
func DecodeProfile(b []byte) (*SubagentProfile, error) {
	const op = "profile"
	if len(b) > MaxConfigRecordBytes {
		return nil, &Error{Op: op, Err: &reason{"file too large", ErrTooLarge}}
	}
	if !json.Valid(b) {
		return nil, Invalid(op, "", "not valid JSON")
	}
	p := &SubagentProfile{}
	if err := decodePart(op, "agent-runtime/agent.profile/v1", "", b, p); err != nil {
		return nil, err
	}
	return p, nil
}

// DecodeTaskTypeSpec decodes a TaskTypeSpec (the agent runtime schema §13) from untrusted
// bytes, validated against its published schema.
func DecodeTaskTypeSpec(b []byte) (*TaskTypeSpec, error) {
	const op = "task type"
	if !json.Valid(b) {
		return nil, Invalid(op, "", "not valid JSON")
	}
	s := &TaskTypeSpec{}
	if err := decodePart(op, "agent-runtime/task.type/v1", "", b, s); err != nil {
		return nil, err
	}
	return s, nil
}
