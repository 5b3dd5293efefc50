package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/runtime"
)

// SecretsNamespace is the memory namespace http grants' secrets are read
// from: secret entries whose values are JSON strings.
const SecretsNamespace = "secrets"

// httpRequest serves http_request (ABI 1.3) through internal/outbound
// under the pack's http grant. The guest's own request is what the trace
// records; the response it gets has every injected secret replaced by
// [secret:NAME], and the attempt record redacts the values too.
func (s *services) httpRequest(ctx context.Context, req []byte) (abi.Status, []byte) {
	r, err := outbound.DecodeRequest(req)
	if err != nil {
		return errorAnswer(err)
	}
	if len(s.b.grants.HTTP) == 0 || s.b.outbound == nil {
		return abi.StatusAccessDenied, mustJSON(map[string]string{"error": "the pack has no http grant"})
	}
	s.mu.Lock()
	if s.http == nil {
		s.http = s.b.outbound.Session(s.b.grants.HTTP, s.secret)
	}
	sess := s.http
	s.mu.Unlock()
	resp, err := sess.Do(ctx, r)
	if err != nil {
		var e *outbound.Error
		if errors.As(err, &e) && e.Kind != "" {
			s.mu.Lock()
			s.breaches = append(s.breaches, runtime.Event{Type: runtime.EventCapBreached, Kind: e.Kind, Limit: e.Limit, Observed: e.Observed})
			s.mu.Unlock()
		}
		return errorAnswer(err)
	}
	return abi.StatusOK, outbound.EncodeResponse(resp)
}

func errorAnswer(err error) (abi.Status, []byte) {
	var e *outbound.Error
	if !errors.As(err, &e) {
		e = &outbound.Error{Status: abi.StatusHostError, Msg: err.Error()}
	}
	return e.Status, outbound.EncodeError(e)
}

// secret reads the tenant's secret name (namespace "secrets"): a secret
// entry holding a JSON string. Its value joins the attempt's redactor.
func (s *services) secret(ctx context.Context, name string) (string, error) {
	e, err := s.b.backend.Get(context.WithoutCancel(ctx), host.Scope{Tenant: orDefault(s.b.tenant, host.DefaultTenant), Namespace: SecretsNamespace}, name)
	if errors.Is(err, host.ErrNotFound) {
		return "", fmt.Errorf("no secret %s in namespace %s (packrun memory put --namespace secrets %s '\"VALUE\"' --secret)", name, SecretsNamespace, name)
	}
	if err != nil {
		return "", err
	}
	var v string
	if !e.Secret || json.Unmarshal(e.Value, &v) != nil {
		return "", fmt.Errorf("memory entry %s/%s is not a secret holding a JSON string", SecretsNamespace, name)
	}
	s.redactor.Add(SecretsNamespace+"/"+name, e.Value)
	return v, nil
}

// httpBreaches returns the limits the attempt's outbound requests hit, as
// cap.breached events.
func (s *services) httpBreaches() []runtime.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]runtime.Event(nil), s.breaches...)
}
