package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// scheduleBody is the body of POST /v1/schedules (and, every field
// optional, of PATCH /v1/schedules/{id}).
type scheduleBody struct {
	Name            *string          `json:"name"`
	IntervalSeconds *int64           `json:"interval_seconds"`
	Task            *json.RawMessage `json:"task"`
	Enabled         *bool            `json:"enabled"`
}

type scheduleList struct {
	Schedules []*host.RecurringSchedule `json:"schedules"`
}

// readSchedule reads a schedule body and its task (nil when absent).
func (s *server) readSchedule(w http.ResponseWriter, r *http.Request) (scheduleBody, *host.TaskIntent, error) {
	var body scheduleBody
	b, err := s.readObject(w, r)
	if err != nil {
		return body, nil, err
	}
	if err := decodeStrict(b, &body); err != nil {
		return body, nil, err
	}
	task, err := decodeScheduleTask(body.Task)
	return body, task, err
}

// decodeScheduleTask decodes the task intent of a schedule body strictly,
// naming fields "task.<field>".
func decodeScheduleTask(raw *json.RawMessage) (*host.TaskIntent, error) {
	if raw == nil {
		return nil, nil
	}
	var in host.TaskIntent
	if err := decodeStrict(*raw, &in); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.detail.Field != "" {
			ae.detail.Field = "task." + ae.detail.Field
			ae.detail.Message = "task." + ae.detail.Message
		}
		return nil, err
	}
	return &in, nil
}

// routable refuses a task type no installed pack serves (422), as POST
// /v1/tasks does; field names the field.
func (s *server) routable(r *http.Request, field, taskType string) error {
	if _, err := s.cfg.Backend.Resolve(r.Context(), taskType); err != nil {
		switch {
		case errors.Is(err, host.ErrNotFound):
			return refuse(http.StatusUnprocessableEntity, CodeUnknownTaskType, field,
				fmt.Sprintf("%s: no installed pack serves %q; install one that does, or route it: packrun task-types set %s --pack NAME --node TYPEID", field, taskType, taskType))
		case errors.Is(err, host.ErrConflict):
			return refuse(http.StatusUnprocessableEntity, CodeAmbiguousTaskType, field, err.Error())
		}
		return err
	}
	return nil
}

// servable is routable for an intent's task type, then the home's checks
// of what the intent names (Config.CheckIntent: skills, adapter, profile,
// model).
func (s *server) servable(r *http.Request, field string, in *host.TaskIntent) error {
	if err := s.routable(r, field, in.TaskType); err != nil {
		return err
	}
	if s.cfg.CheckIntent != nil {
		return s.cfg.CheckIntent(r.Context(), in)
	}
	return nil
}

// createSchedule is POST /v1/schedules: {"name", "interval_seconds",
// "task": TaskIntent without source, "enabled"?} → 201 the schedule.
func (s *server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	body, task, err := s.readSchedule(w, r)
	if err != nil {
		return err
	}
	spec := host.ScheduleSpec{Enabled: body.Enabled, Tenant: tenantOf(r, "")}
	if body.Name != nil {
		spec.Name = *body.Name
	}
	if body.IntervalSeconds != nil {
		spec.IntervalSeconds = *body.IntervalSeconds
	}
	if task == nil {
		return refuse(http.StatusBadRequest, CodeInvalid, "task", "task: required")
	}
	spec.Task = *task
	if err := host.ValidateScheduleSpec("create schedule", &spec); err != nil {
		return err
	}
	if err := s.servable(r, "task.task_type", &spec.Task); err != nil {
		return err
	}
	rec, err := s.cfg.Backend.CreateSchedule(r.Context(), spec)
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	w.Header().Set("Location", "/v1/schedules/"+url.PathEscape(rec.ScheduleID))
	reply(w, http.StatusCreated, rec)
	return nil
}

// listSchedules is GET /v1/schedules.
func (s *server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	tenant := ""
	if p := auth.From(r.Context()); !p.Insecure {
		tenant = p.Tenant
	}
	l, err := s.cfg.Backend.ListSchedules(r.Context(), tenant)
	if err != nil {
		return err
	}
	if l == nil {
		l = []*host.RecurringSchedule{}
	}
	reply(w, http.StatusOK, scheduleList{l})
	return nil
}

// getSchedule is GET /v1/schedules/{id} ({id} may be the name).
func (s *server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.cfg.Backend.Schedule(r.Context(), tenantOf(r, ""), r.PathValue("id"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, rec)
	return nil
}

// patchSchedule is PATCH /v1/schedules/{id}: {"enabled"?,
// "interval_seconds"?, "task"?} → the schedule after the change.
func (s *server) patchSchedule(w http.ResponseWriter, r *http.Request) error {
	body, task, err := s.readSchedule(w, r)
	if err != nil {
		return err
	}
	if body.Name != nil {
		return refuse(http.StatusBadRequest, CodeInvalid, "name", "name: a schedule cannot be renamed; delete it and create another")
	}
	if task != nil {
		if err := host.ValidateScheduleTask("update schedule", task); err != nil {
			return err
		}
		if err := s.servable(r, "task.task_type", task); err != nil {
			return err
		}
	}
	rec, err := s.cfg.Backend.UpdateSchedule(r.Context(), tenantOf(r, ""), r.PathValue("id"),
		host.ScheduleUpdate{Enabled: body.Enabled, IntervalSeconds: body.IntervalSeconds, Task: task})
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusOK, rec)
	return nil
}

// deleteSchedule is DELETE /v1/schedules/{id} → 200 the deleted schedule.
func (s *server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	ctx, tenant, ref := r.Context(), tenantOf(r, ""), r.PathValue("id")
	rec, err := s.cfg.Backend.Schedule(ctx, tenant, ref)
	if err != nil {
		return err
	}
	if err := s.cfg.Backend.DeleteSchedule(ctx, tenant, rec.ScheduleID); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusOK, rec)
	return nil
}
