package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

const replaySuffix = ":replay"

type eventList struct {
	Events []*host.Event `json:"events"`
}

// taskEvents is GET /v1/tasks/{id}/events: the runtime events of one of
// the caller's tasks (and of its attempts), in chain order.
func (s *server) taskEvents(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.ownTask(r, id); err != nil {
		return err
	}
	limit, err := listLimit(r.URL.Query())
	if err != nil {
		return err
	}
	evs, err := s.cfg.Backend.Events(r.Context(), host.EventFilter{TaskID: id, Limit: limit})
	if err != nil {
		return err
	}
	if evs == nil {
		evs = []*host.Event{}
	}
	reply(w, http.StatusOK, eventList{evs})
	return nil
}

// attemptAction is POST /v1/attempts/{id}:replay.
func (s *server) attemptAction(w http.ResponseWriter, r *http.Request) error {
	seg := r.PathValue("id")
	id, ok := strings.CutSuffix(seg, replaySuffix)
	if !ok {
		return refuse(http.StatusNotFound, CodeNotFound, "", "POST to an attempt needs an action: POST /v1/attempts/{id}:replay")
	}
	if _, err := s.ownAttempt(r, id); err != nil {
		return err
	}
	if s.cfg.Replay == nil {
		return refuse(http.StatusServiceUnavailable, CodeUnavailable, "", "this server does not replay attempts")
	}
	v, err := s.cfg.Replay(r.Context(), id)
	if err != nil {
		return err
	}
	reply(w, http.StatusOK, v)
	return nil
}

// getArtifact is GET /v1/artifacts/{id}: an artifact record of one of the
// caller's tasks or attempts.
func (s *server) getArtifact(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	notFound := refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("no artifact %s", host.ShortName(id)))
	a, err := s.cfg.Backend.Artifact(r.Context(), id)
	if err != nil {
		if isNotFound(err) {
			return notFound
		}
		return err
	}
	switch {
	case a.AttemptID != "":
		_, err = s.ownAttempt(r, a.AttemptID)
	case a.TaskID != "":
		_, err = s.ownTask(r, a.TaskID)
	case !auth.From(r.Context()).Insecure:
		err = notFound // belongs to no task: no tenant's
	}
	if err != nil {
		if isNotFound(err) {
			return notFound
		}
		return err
	}
	reply(w, http.StatusOK, a)
	return nil
}

func isNotFound(err error) bool {
	ae := fromHost(err)
	return ae.status == http.StatusNotFound
}

// memoryScope is the caller's tenant's namespace a memory route names.
func memoryScope(r *http.Request) host.Scope {
	return host.Scope{Tenant: tenantOf(r, ""), Namespace: r.PathValue("namespace")}
}

type keyList struct {
	Keys []string `json:"keys"`
}

// listMemory is GET /v1/memory/{namespace}.
func (s *server) listMemory(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.cfg.Backend.List(r.Context(), memoryScope(r), r.URL.Query().Get("prefix"))
	if err != nil {
		return err
	}
	if keys == nil {
		keys = []string{}
	}
	reply(w, http.StatusOK, keyList{keys})
	return nil
}

// getMemory is GET /v1/memory/{namespace}/{key}. A secret's value is sent
// to an admin token only; others see that it is a secret.
func (s *server) getMemory(w http.ResponseWriter, r *http.Request) error {
	e, err := s.cfg.Backend.Get(r.Context(), memoryScope(r), r.PathValue("key"))
	if err != nil {
		return err
	}
	if e.Secret && !auth.From(r.Context()).Has(auth.ScopeAdmin) {
		e.Value = nil
	}
	reply(w, http.StatusOK, e)
	return nil
}

type putBody struct {
	Value  json.RawMessage `json:"value"`
	Secret bool            `json:"secret"`
}

// putMemory is PUT /v1/memory/{namespace}/{key}[?ttl=1h].
func (s *server) putMemory(w http.ResponseWriter, r *http.Request) error {
	var opts host.PutOptions
	if v := r.URL.Query().Get("ttl"); v != "" {
		d, err := host.ParseDuration(v)
		if err != nil || d <= 0 {
			return refuse(http.StatusBadRequest, CodeInvalid, "ttl", "ttl: must be a positive duration such as 90s, 24h or 30d")
		}
		opts.TTL = d
	}
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	var body putBody
	if err := decodeStrict(b, &body); err != nil {
		return err
	}
	if len(body.Value) == 0 {
		return refuse(http.StatusBadRequest, CodeInvalid, "value", "value: required")
	}
	opts.Secret = body.Secret
	scope, key := memoryScope(r), r.PathValue("key")
	if err := s.cfg.Backend.Put(r.Context(), scope, key, body.Value, opts); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	return s.getMemory(w, r)
}

// deleteMemory is DELETE /v1/memory/{namespace}/{key}.
func (s *server) deleteMemory(w http.ResponseWriter, r *http.Request) error {
	if err := s.cfg.Backend.Delete(r.Context(), memoryScope(r), r.PathValue("key")); err != nil {
		return err
	}
	s.recordCall(r, "", "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}
