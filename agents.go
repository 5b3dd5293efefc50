package packrun

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/packrun/packrun/host"
)

// AddAgent registers the agent FILE holds: {"agent": AgentIdentity,
// "wallets": [WalletIdentity...], "constitution": AgentConstitution}
// (the agent runtime schema §1, §1a, §1b; field names as written), replacing the agent
// with the same agent_id. The constitution's soul_path and purpose_path
// are files relative to FILE's directory (or absolute); their content
// hashes ("sha256:<hex>") are computed here, and a soul_hash or
// purpose_hash the FILE gives must match them (a FILE may leave them out).
// A malformed FILE is refused with one line naming the field; nothing is
// stored.
func (h *Host) AddAgent(ctx context.Context, file string) (rec *host.AgentRecord, replaced bool, err error) {
	b, err := ReadFile(file, host.MaxConfigRecordBytes)
	if err != nil {
		return nil, false, err
	}
	b, err = fillConstitutionHashes(b, filepath.Dir(file))
	if err != nil {
		return nil, false, err
	}
	if rec, err = host.DecodeAgentRecord(b); err != nil {
		return nil, false, err
	}
	replaced, err = h.store.PutAgent(ctx, rec)
	return rec, replaced, err
}

// fillConstitutionHashes computes the content hashes of the constitution's
// files and puts them in the FILE's JSON (checking any it gives).
func fillConstitutionHashes(b []byte, dir string) ([]byte, error) {
	const op = "agent"
	var doc map[string]json.RawMessage
	if json.Unmarshal(b, &doc) != nil {
		return b, nil // the decoder says what is wrong
	}
	var c map[string]any
	if raw, ok := doc["constitution"]; !ok || json.Unmarshal(raw, &c) != nil || c == nil {
		return b, nil
	}
	for _, f := range []struct{ path, hash string }{{"soul_path", "soul_hash"}, {"purpose_path", "purpose_hash"}} {
		p, _ := c[f.path].(string)
		if p == "" {
			continue // required: the decoder names it
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		content, err := os.ReadFile(p)
		if err != nil {
			return nil, host.Invalid(op, "constitution."+f.path, "%s: cannot be read: %v", p, errorsUnwrapAll(err))
		}
		sum := host.ContentHash(content)
		if given, ok := c[f.hash].(string); ok && given != sum {
			return nil, host.Invalid(op, "constitution."+f.hash, "%s does not match %s (%s)", given, p, sum)
		}
		c[f.hash] = sum
	}
	doc["constitution"], _ = json.Marshal(c)
	return json.Marshal(doc)
}

// errorsUnwrapAll is the innermost error of a path error (the reason, not
// the path again).
func errorsUnwrapAll(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Agents lists the registered agents by agent_id.
func (h *Host) Agents(ctx context.Context) ([]host.AgentRecord, error) {
	return h.store.ListAgents(ctx)
}

// Agent returns one registered agent (host.ErrNotFound if none).
func (h *Host) Agent(ctx context.Context, id string) (*host.AgentRecord, error) {
	return h.store.Agent(ctx, id)
}

// AddProfile registers the SubagentProfile FILE holds (the agent runtime schema §3),
// replacing the one with the same profile_id. Its default_adapter_id must
// be a configured adapter, its default_model one that adapter offers, and
// its skill_ids installed skills. A malformed FILE is refused with one
// line naming the field; nothing is stored.
func (h *Host) AddProfile(ctx context.Context, file string) (p *host.SubagentProfile, replaced bool, err error) {
	const op = "profile"
	b, err := ReadFile(file, host.MaxConfigRecordBytes)
	if err != nil {
		return nil, false, err
	}
	if p, err = host.DecodeProfile(b); err != nil {
		return nil, false, err
	}
	if _, err := h.adapter(op, "default_adapter_id", p.DefaultAdapterID); err != nil {
		return nil, false, err
	}
	if p.DefaultModel != "" {
		if err := h.checkModel(op, "default_model", p.DefaultModel, p.DefaultAdapterID); err != nil {
			return nil, false, err
		}
	}
	if err := h.checkSkillIDs(ctx, op, "skill_ids", p.SkillIDs, nil); err != nil {
		return nil, false, err
	}
	if id := p.IntegrationPolicy["agent_id"]; id != "" {
		if _, err := h.store.Agent(ctx, id); err != nil {
			return nil, false, host.Invalid(op, "integration_policy.agent_id", "no agent %q is registered (packrun agents list)", id)
		}
	}
	replaced, err = h.store.PutProfile(ctx, p)
	return p, replaced, err
}

// Profiles lists the registered profiles by profile_id.
func (h *Host) Profiles(ctx context.Context) ([]host.SubagentProfile, error) {
	return h.store.ListProfiles(ctx)
}

// Profile returns one registered profile (host.ErrNotFound if none).
func (h *Host) Profile(ctx context.Context, id string) (*host.SubagentProfile, error) {
	return h.store.Profile(ctx, id)
}
