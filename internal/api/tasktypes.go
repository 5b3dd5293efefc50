package api

import (
	"context"
	"net/http"

	"github.com/packrun/packrun/host"
)

// TaskTypeService is the Host's task type registry (the agent runtime schema §13).
type TaskTypeService interface {
	TaskTypes(ctx context.Context) ([]host.TaskTypeInfo, error)
	TaskType(ctx context.Context, taskType string) (*host.TaskTypeInfo, error)
	SetTaskType(ctx context.Context, spec host.TaskTypeSpec, route *host.TaskTypeRoute) error
	UnsetTaskType(ctx context.Context, taskType string) error
}

func (s *server) taskTypes() (TaskTypeService, error) {
	if s.cfg.TaskTypes == nil {
		return nil, refuse(http.StatusServiceUnavailable, CodeUnavailable, "", "this server does not manage task types")
	}
	return s.cfg.TaskTypes, nil
}

type taskTypeList struct {
	TaskTypes []host.TaskTypeInfo `json:"task_types"`
}

// listTaskTypes is GET /v1/task-types.
func (s *server) listTaskTypes(w http.ResponseWriter, r *http.Request) error {
	tt, err := s.taskTypes()
	if err != nil {
		return err
	}
	list, err := tt.TaskTypes(r.Context())
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, taskTypeList{list})
	return nil
}

// getTaskType is GET /v1/task-types/{type}.
func (s *server) getTaskType(w http.ResponseWriter, r *http.Request) error {
	tt, err := s.taskTypes()
	if err != nil {
		return err
	}
	t, err := tt.TaskType(r.Context(), r.PathValue("type"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, t)
	return nil
}

// taskTypeBody is PUT /v1/task-types/{type}'s body: the spec (task_type
// may be left out; when given it must be the path's) and, optionally, the
// route that serves the type.
type taskTypeBody struct {
	host.TaskTypeSpec
	Pack string `json:"pack,omitempty"`
	Node string `json:"node,omitempty"`
}

// putTaskType is PUT /v1/task-types/{type}.
func (s *server) putTaskType(w http.ResponseWriter, r *http.Request) error {
	tt, err := s.taskTypes()
	if err != nil {
		return err
	}
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var body taskTypeBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	name := r.PathValue("type")
	if body.TaskType != "" && body.TaskType != name {
		return refuse(http.StatusBadRequest, CodeInvalid, "task_type", "task_type: must be the path's ("+name+") or left out")
	}
	body.TaskType = name
	if (body.Pack == "") != (body.Node == "") {
		return refuse(http.StatusBadRequest, CodeInvalid, "node", "pack and node go together: they name the route that serves the type")
	}
	var route *host.TaskTypeRoute
	if body.Pack != "" {
		route = &host.TaskTypeRoute{Pack: body.Pack, Node: body.Node}
	}
	ctx := r.Context()
	if err := tt.SetTaskType(ctx, body.TaskTypeSpec, route); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	t, err := tt.TaskType(ctx, name)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, t)
	return nil
}

// deleteTaskType is DELETE /v1/task-types/{type}.
func (s *server) deleteTaskType(w http.ResponseWriter, r *http.Request) error {
	tt, err := s.taskTypes()
	if err != nil {
		return err
	}
	if err := tt.UnsetTaskType(r.Context(), r.PathValue("type")); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// AgentService lists the home's agents and subagent profiles.
type AgentService interface {
	Agents(ctx context.Context) ([]host.AgentRecord, error)
	Profiles(ctx context.Context) ([]host.SubagentProfile, error)
}

type agentList struct {
	Agents []host.AgentRecord `json:"agents"`
}

type profileList struct {
	Profiles []host.SubagentProfile `json:"profiles"`
}

// listAgents is GET /v1/agents.
func (s *server) listAgents(w http.ResponseWriter, r *http.Request) error {
	list := []host.AgentRecord{}
	if s.cfg.Agents != nil {
		got, err := s.cfg.Agents.Agents(r.Context())
		if err != nil {
			return err
		}
		list = append(list, got...)
	}
	reply(w, http.StatusOK, agentList{list})
	return nil
}

// listProfiles is GET /v1/profiles.
func (s *server) listProfiles(w http.ResponseWriter, r *http.Request) error {
	list := []host.SubagentProfile{}
	if s.cfg.Agents != nil {
		got, err := s.cfg.Agents.Profiles(r.Context())
		if err != nil {
			return err
		}
		list = append(list, got...)
	}
	reply(w, http.StatusOK, profileList{list})
	return nil
}
