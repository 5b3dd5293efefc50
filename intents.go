package packrun

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/host/schema"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/packs"
)

// taskSpec returns the operator's spec of taskType, or a bare one when
// none is set.
func (h *Host) taskSpec(ctx context.Context, taskType string) (host.TaskTypeSpec, error) {
	spec, err := h.store.TaskTypeSpec(ctx, taskType)
	if errors.Is(err, host.ErrNotFound) {
		return host.TaskTypeSpec{TaskType: taskType}, nil
	}
	return spec, err
}

// CheckIntent checks what an intent names against this home before it is
// stored: its task type is served (ErrNotFound or ErrConflict from the
// routes), its skill_ids are installed skills allowed for the task type
// (the type's allowed_skill_ids when set), its requested_adapter_id is a
// configured adapter, its requested_profile_id a registered profile, and
// its requested_model one that the adapter the task resolves to offers.
// A refusal is a validation error naming the field; nothing is stored.
// Host.Enqueue, the API and the CLI call it; the dispatcher calls it for
// the follow-ups a node stages.
func (h *Host) CheckIntent(ctx context.Context, in *host.TaskIntent) error {
	const op = "task intent"
	if _, err := h.store.Resolve(ctx, in.TaskType); err != nil {
		return err
	}
	spec, err := h.taskSpec(ctx, in.TaskType)
	if err != nil {
		return err
	}
	if id := spec.PayloadSchemaID; id != "" && id != NodeInputSchema {
		if err := schema.Validate(id, in.Payload); err != nil {
			if se, ok := errors.AsType[*schema.Error](err); ok {
				return host.Invalid(op, strings.TrimSuffix("payload."+se.Path, "."), "%s (payload_schema_id %s)", se.Reason, id)
			}
			return err
		}
	}
	if err := h.checkSkillIDs(ctx, op, "skill_ids", in.SkillIDs, spec.AllowedSkillIDs); err != nil {
		return err
	}
	if id := in.RequestedAdapterID; id != "" {
		if _, err := h.adapter(op, "requested_adapter_id", id); err != nil {
			return err
		}
	}
	var profile *host.SubagentProfile
	if id := orString(in.RequestedProfileID, spec.DefaultProfileID); id != "" {
		p, err := h.store.Profile(ctx, id)
		if errors.Is(err, host.ErrNotFound) {
			field := "requested_profile_id"
			if in.RequestedProfileID == "" {
				field = "task_type" // the type's default names a profile since removed
			}
			return host.Invalid(op, field, "no profile %q is registered (packrun profiles list)", id)
		}
		if err != nil {
			return err
		}
		profile = p
	}
	if in.RequestedModel != "" {
		return h.checkModel(op, "requested_model", in.RequestedModel, Selection(in.RequestedAdapterID, spec, profile))
	}
	return nil
}

// Selection is the adapter a task's calls go to: the intent's
// requested_adapter_id, else its task type's default_adapter_id, else its
// profile's default_adapter_id ("" when none says).
func Selection(requested string, spec host.TaskTypeSpec, profile *host.SubagentProfile) string {
	if requested != "" {
		return requested
	}
	if spec.DefaultAdapterID != "" {
		return spec.DefaultAdapterID
	}
	if profile != nil {
		return profile.DefaultAdapterID
	}
	return ""
}

// checkSkillIDs checks that ids name installed skills, and, when allowed
// is not empty, ones it lists.
func (h *Host) checkSkillIDs(ctx context.Context, op, field string, ids, allowed []string) error {
	if len(ids) == 0 {
		return nil
	}
	installed, err := h.Skills(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(installed, func(s packs.InstalledSkill) bool { return s.SkillID == id }) {
			return host.Invalid(op, field, "%q is not an installed skill (GET /v1/skills)", id)
		}
		if len(allowed) > 0 && !slices.Contains(allowed, id) {
			return host.Invalid(op, field, "%q is not allowed for this task type (allowed_skill_ids: %s)", id, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// adapter returns the configured adapter id, or a validation error naming
// field.
func (h *Host) adapter(op, field, id string) (adapters.AdapterConfig, error) {
	a, ok := h.adapters.Adapter(id)
	if !ok {
		known := strings.Join(h.adapters.IDs(), ", ")
		if known == "" {
			known = "none"
		}
		return a, host.Invalid(op, field, "no adapter %q is configured in adapters.json (configured: %s)", id, known)
	}
	return a, nil
}

// checkModel checks that the adapter adapterID offers model.
func (h *Host) checkModel(op, field, model, adapterID string) error {
	if adapterID == "" {
		return host.Invalid(op, field, "%q: no adapter is requested or defaulted (requested_adapter_id, or the task type's or profile's default_adapter_id) to offer it", model)
	}
	a, err := h.adapter(op, field, adapterID)
	if err != nil {
		return err
	}
	if !a.Offers(model) {
		offered := strings.Join(a.OfferedModels(), ", ")
		if offered == "" {
			offered = "none"
		}
		return host.Invalid(op, field, "adapter %s does not offer model %q (offers: %s)", adapterID, model, offered)
	}
	return nil
}

func orString(s, d string) string {
	if s != "" {
		return s
	}
	return d
}
