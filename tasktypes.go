package packrun

import (
	"context"
	"encoding/json"
	"strings"

	"errors"
	"slices"

	"github.com/packrun/packrun/host/schema"

	"github.com/packrun/packrun/host"
)

// NodeInputSchema is the payload_schema_id of a spec that names none: the
// payload is checked against the serving node's inputSchema (which the
// dispatcher enforces for every task). Any other payload_schema_id must be
// a published schema (host/schema), which payloads are checked against
// at enqueue.
const NodeInputSchema = "node:inputSchema"

// TaskType is what this home knows of one task type (host.TaskTypeInfo).
type TaskType = host.TaskTypeInfo

// TaskTypes lists every task type with a route or a spec, by name.
func (h *Host) TaskTypes(ctx context.Context) ([]TaskType, error) {
	routes, err := h.store.ListTaskTypes(ctx)
	if err != nil {
		return nil, err
	}
	specs, err := h.store.ListTaskTypeSpecs(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, r := range routes {
		names = append(names, r.TaskType)
	}
	for _, s := range specs {
		names = append(names, s.TaskType)
	}
	slices.Sort(names)
	out := []TaskType{}
	for _, name := range slices.Compact(names) {
		t, err := h.TaskType(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, *t)
	}
	return out, nil
}

// TaskType describes one task type; ErrNotFound when it has neither a
// route nor a spec.
func (h *Host) TaskType(ctx context.Context, taskType string) (*TaskType, error) {
	routes, err := h.store.ListTaskTypes(ctx)
	if err != nil {
		return nil, err
	}
	t := &TaskType{TaskType: taskType, Routes: []host.TaskTypeRoute{}}
	for _, r := range routes {
		if r.TaskType == taskType {
			t.Routes = append(t.Routes, r)
		}
	}
	spec, err := h.store.TaskTypeSpec(ctx, taskType)
	switch {
	case err == nil:
		t.Spec = &spec
	case !errors.Is(err, host.ErrNotFound):
		return nil, err
	}
	if t.Spec == nil && len(t.Routes) == 0 {
		return nil, host.Errorf("task type", taskType, host.ErrNotFound, "no route and no spec")
	}
	r, err := h.store.Resolve(ctx, taskType)
	switch {
	case err == nil:
		t.Resolved = &r
	case errors.Is(err, host.ErrNotFound), errors.Is(err, host.ErrConflict):
		t.Error = err.Error()
	default:
		return nil, err
	}
	return t, nil
}

// SetTaskType stores spec as its task type's spec, and, when route names
// a pack and node, makes that route win for the type (an operator
// override). What the spec names must exist here: default_profile_id a
// registered profile, default_adapter_id a configured adapter,
// default_model a model the type's adapter offers, allowed_skill_ids
// installed skills; the route's pack must be installed with that node.
// Refusals name the field; nothing is stored.
func (h *Host) SetTaskType(ctx context.Context, spec host.TaskTypeSpec, route *host.TaskTypeRoute) error {
	const op = "task type"
	if spec.PayloadSchemaID == "" {
		spec.PayloadSchemaID = NodeInputSchema
	}
	b, _ := json.Marshal(spec)
	decoded, err := host.DecodeTaskTypeSpec(b)
	if err != nil {
		return err
	}
	spec = *decoded
	if id := spec.PayloadSchemaID; id != NodeInputSchema && schema.Raw(id) == nil {
		return host.Invalid(op, "payload_schema_id", "%q: use %s (the serving node's inputSchema) or a published schema id (%s)", id, NodeInputSchema, strings.Join(schema.IDs(), ", "))
	}
	var profile *host.SubagentProfile
	if id := spec.DefaultProfileID; id != "" {
		if profile, err = h.store.Profile(ctx, id); errors.Is(err, host.ErrNotFound) {
			return host.Invalid(op, "default_profile_id", "no profile %q is registered (packrun profiles list)", id)
		} else if err != nil {
			return err
		}
	}
	if id := spec.DefaultAdapterID; id != "" {
		if _, err := h.adapter(op, "default_adapter_id", id); err != nil {
			return err
		}
	}
	if m := spec.DefaultModel; m != "" {
		if err := h.checkModel(op, "default_model", m, Selection("", spec, profile)); err != nil {
			return err
		}
	}
	if err := h.checkSkillIDs(ctx, op, "allowed_skill_ids", spec.AllowedSkillIDs, nil); err != nil {
		return err
	}
	if route != nil {
		route.TaskTypeSpec = spec
		if err := h.checkRoute(ctx, route); err != nil {
			return err
		}
		if err := h.store.SetTaskTypeOverride(ctx, *route); err != nil {
			return err
		}
	}
	return h.store.SetTaskTypeSpec(ctx, spec)
}

// checkRoute checks that route's pack is installed and has its node.
func (h *Host) checkRoute(ctx context.Context, route *host.TaskTypeRoute) error {
	const op = "task type"
	if err := host.CheckRoute(op, route); err != nil {
		return err
	}
	_, m, err := h.Pack(ctx, route.Pack)
	if errors.Is(err, host.ErrPackNotInstalled) {
		return host.Invalid(op, "pack", "%s is not installed", route.Pack)
	}
	if err != nil {
		return err
	}
	if _, ok := m.Node(route.Node); !ok {
		return host.Invalid(op, "node", "%s has no node %q", route.Pack, route.Node)
	}
	return nil
}

// UnsetTaskType removes a task type's spec and its operator override
// (whichever it has); ErrNotFound when it has neither. Manifest routes
// stay: they follow the installed packs.
func (h *Host) UnsetTaskType(ctx context.Context, taskType string) error {
	errSpec := h.store.RemoveTaskTypeSpec(ctx, taskType)
	errRoute := h.store.RemoveTaskTypeOverride(ctx, taskType)
	for _, err := range []error{errSpec, errRoute} {
		if err != nil && !errors.Is(err, host.ErrNotFound) {
			return err
		}
	}
	if errSpec != nil && errRoute != nil {
		return host.Errorf("task type", taskType, host.ErrNotFound, "no spec and no override")
	}
	return nil
}
