package packrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/packrun/packrun/host"
)

// AddWorkflow registers the WorkflowDefinition FILE holds (the agent runtime schema §10,
// field names as written), replacing the definition of the same
// workflow_type; see PutWorkflow.
func (h *Host) AddWorkflow(ctx context.Context, file string) (def *host.WorkflowDefinition, replaced bool, err error) {
	b, err := ReadFile(file, host.MaxConfigRecordBytes)
	if err != nil {
		return nil, false, err
	}
	if def, err = host.DecodeWorkflowDefinition(b); err != nil {
		return nil, false, err
	}
	replaced, err = h.PutWorkflow(ctx, def)
	return def, replaced, err
}

// PutWorkflow stores a definition after CheckWorkflow. Task types need no
// installed pack yet: a state's task waits in the queue until one serves
// it.
func (h *Host) PutWorkflow(ctx context.Context, def *host.WorkflowDefinition) (replaced bool, err error) {
	if err := h.CheckWorkflow(ctx, def); err != nil {
		return false, err
	}
	return h.store.PutWorkflow(ctx, def)
}

// CheckWorkflow checks what a definition's states name against this
// home: each default_profile_id a registered profile, each of
// default_skill_ids an installed skill. Refusals name the field.
func (h *Host) CheckWorkflow(ctx context.Context, def *host.WorkflowDefinition) error {
	const op = "workflow"
	if err := host.ValidateWorkflowDefinition(def); err != nil {
		return err
	}
	for i, s := range def.States {
		if id := s.DefaultProfileID; id != "" {
			if _, err := h.store.Profile(ctx, id); errors.Is(err, host.ErrNotFound) {
				return host.Invalid(op, fmt.Sprintf("states[%d].default_profile_id", i), "no profile %q is registered (packrun profiles list)", id)
			} else if err != nil {
				return err
			}
		}
		if err := h.checkSkillIDs(ctx, op, fmt.Sprintf("states[%d].default_skill_ids", i), s.DefaultSkillIDs, nil); err != nil {
			return err
		}
	}
	return nil
}
