package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

type workflowList struct {
	Workflows []*host.WorkflowDefinition `json:"workflows"`
}

type workflowRecordList struct {
	Records []*host.WorkflowRecord `json:"workflow_records"`
}

// putWorkflow is POST /v1/workflows: a WorkflowDefinition → 201 when new,
// 200 when it replaced the definition of the same workflow_type.
func (s *server) putWorkflow(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	def, err := host.DecodeWorkflowDefinition(b)
	if err != nil {
		return err
	}
	if s.cfg.CheckWorkflow != nil {
		if err := s.cfg.CheckWorkflow(r.Context(), def); err != nil {
			return err
		}
	}
	replaced, err := s.cfg.Backend.PutWorkflow(r.Context(), def)
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	status := http.StatusCreated
	if replaced {
		status = http.StatusOK
	}
	w.Header().Set("Location", "/v1/workflows/"+url.PathEscape(def.WorkflowType))
	reply(w, status, def)
	return nil
}

// listWorkflows is GET /v1/workflows.
func (s *server) listWorkflows(w http.ResponseWriter, r *http.Request) error {
	l, err := s.cfg.Backend.ListWorkflows(r.Context())
	if err != nil {
		return err
	}
	if l == nil {
		l = []*host.WorkflowDefinition{}
	}
	reply(w, http.StatusOK, workflowList{l})
	return nil
}

// getWorkflow is GET /v1/workflows/{type}.
func (s *server) getWorkflow(w http.ResponseWriter, r *http.Request) error {
	def, err := s.cfg.Backend.Workflow(r.Context(), r.PathValue("type"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, def)
	return nil
}

// workflowStartBody is the body of POST /v1/workflows/{type}/records.
type workflowStartBody struct {
	InstanceKey string          `json:"instance_key"`
	State       string          `json:"state"`
	Context     json.RawMessage `json:"context"`
}

// startWorkflow is POST /v1/workflows/{type}/records: {"instance_key",
// "state"?, "context"?} → 201 the new record, or 200 the tenant's
// existing record of that instance_key (unchanged).
func (s *server) startWorkflow(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var body workflowStartBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	st := host.WorkflowStart{WorkflowType: r.PathValue("type"), InstanceKey: body.InstanceKey, State: body.State,
		Context: body.Context, Tenant: tenantOf(r, "")}
	if _, err := s.cfg.Backend.Workflow(r.Context(), st.WorkflowType); err != nil {
		return err // 404: no such workflow
	}
	rec, created, err := s.cfg.Backend.StartWorkflow(r.Context(), st)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		s.recordCall(r, "", "")
		status = http.StatusCreated
		if s.cfg.Dispatcher != nil {
			s.cfg.Dispatcher.Wake() // its first state may have enqueued a task
		}
	}
	w.Header().Set("Location", "/v1/workflow-records/"+url.PathEscape(rec.WorkflowID))
	reply(w, status, rec)
	return nil
}

// listWorkflowRecords is GET /v1/workflow-records[?type=&limit=], newest
// first.
func (s *server) listWorkflowRecords(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := listLimit(q)
	if err != nil {
		return err
	}
	f := host.WorkflowRecordFilter{WorkflowType: q.Get("type"), Limit: limit}
	if p := auth.From(r.Context()); !p.Insecure {
		f.Tenant = p.Tenant
	}
	l, err := s.cfg.Backend.ListWorkflowRecords(r.Context(), f)
	if err != nil {
		return err
	}
	if l == nil {
		l = []*host.WorkflowRecord{}
	}
	reply(w, http.StatusOK, workflowRecordList{l})
	return nil
}

// getWorkflowRecord is GET /v1/workflow-records/{id}.
func (s *server) getWorkflowRecord(w http.ResponseWriter, r *http.Request) error {
	rec, err := s.cfg.Backend.WorkflowRecord(r.Context(), tenantOf(r, ""), r.PathValue("id"))
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, rec)
	return nil
}

// workflowRecordAction is POST /v1/workflow-records/{id}:cancel → the
// record, canceled (409 when it is completed or canceled already).
func (s *server) workflowRecordAction(w http.ResponseWriter, r *http.Request) error {
	id, ok := strings.CutSuffix(r.PathValue("id"), ":cancel")
	if !ok {
		w.Header().Set("Allow", "GET, HEAD")
		return refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", "POST to a workflow record needs an action: POST /v1/workflow-records/{id}:cancel")
	}
	rec, err := s.cfg.Backend.CancelWorkflowRecord(r.Context(), tenantOf(r, ""), id)
	if err != nil {
		return err
	}
	s.recordCall(r, "", "")
	reply(w, http.StatusOK, rec)
	return nil
}
