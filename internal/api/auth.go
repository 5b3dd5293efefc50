package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// Auth configures who may call the API.
type Auth struct {
	// Authenticate resolves a bearer token to its principal; an unknown,
	// revoked or expired token is an error (401, whatever the error says:
	// the client is not told which).
	Authenticate func(ctx context.Context, token string) (*auth.Principal, error)
	// Insecure serves every request, without a token, as a principal with
	// every scope that takes the tenant a request names (packrun serve
	// --insecure-no-auth, allowed on loopback only). With neither
	// Authenticate nor Insecure every request is refused.
	Insecure bool
	// Rate and Burst bound each token's requests: Rate a second on
	// average, Burst at once (default 2×Rate). 0: no limit.
	Rate  float64
	Burst int
	// Limiter, when set, bounds each token's requests instead of Rate and
	// Burst: the Host hands the console the same one, so a token has one
	// budget on both surfaces.
	Limiter *auth.Limiter
}

// CodeUnauthorized, CodeForbidden and CodeRateLimited are the refusals of
// the authentication layer.
const (
	CodeUnauthorized = "unauthorized" // 401: no token, or not a valid one (WWW-Authenticate: Bearer)
	CodeForbidden    = "forbidden"    // 403: the token lacks the route's scope
	CodeRateLimited  = "rate_limited" // 429: the token is over its rate (Retry-After)
)

// authenticate finds who r acts as, or refuses it.
func (s *server) authenticate(r *http.Request) (*auth.Principal, error) {
	if s.cfg.Auth.Insecure {
		return &auth.Principal{Insecure: true, Tenant: host.DefaultTenant}, nil
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, unauthorized("this API needs a bearer token: send Authorization: Bearer <token> (create one with packrun tokens create)")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return nil, unauthorized("Authorization must be Bearer <token>")
	}
	if s.cfg.Auth.Authenticate == nil {
		return nil, unauthorized("this server accepts no tokens")
	}
	p, err := s.cfg.Auth.Authenticate(r.Context(), strings.TrimSpace(tok))
	if err != nil || p == nil {
		return nil, unauthorized("the token is not valid: unknown, revoked or expired")
	}
	return p, nil
}

func unauthorized(msg string) *apiError {
	return refuse(http.StatusUnauthorized, CodeUnauthorized, "", msg)
}

// need refuses a principal without scope sc, naming it.
func need(p *auth.Principal, sc auth.Scope) error {
	if p.Has(sc) {
		return nil
	}
	return refuse(http.StatusForbidden, CodeForbidden, "", fmt.Sprintf("this token lacks the %s scope", sc))
}

// scoped lets h see only requests whose principal has sc ("" = any valid
// token).
func scoped(sc auth.Scope, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if d := describing(r); d != nil {
			d.scoped, d.scope = true, sc
			return h(w, r)
		}
		if sc != "" {
			if err := need(auth.From(r.Context()), sc); err != nil {
				return err
			}
		}
		return h(w, r)
	}
}

// tenantOf is the tenant a request's reads and writes are bound to: the
// token's; without authentication, the one the request names (or the
// default).
func tenantOf(r *http.Request, named string) string {
	p := auth.From(r.Context())
	if p.Insecure && named != "" {
		return named
	}
	return p.Tenant
}

// refuseTenantField refuses a body or query that names a tenant other than
// the token's: the tenant comes from the token.
func refuseTenantField(r *http.Request, field, named string) error {
	p := auth.From(r.Context())
	if p.Insecure || named == "" || named == p.Tenant {
		return nil
	}
	return refuse(http.StatusForbidden, CodeForbidden, field, fmt.Sprintf("%s: this token acts for its own tenant only; leave %s out", field, field))
}

// EventAPICall is the runtime event a state-changing API call leaves,
// naming the token that made it.
const EventAPICall = "api_call"

// callerOf names the caller of r as a write's own event records it: its
// token id, or "none" without authentication.
func callerOf(r *http.Request) string {
	p := auth.From(r.Context())
	if p.Insecure {
		return "none"
	}
	return p.TokenID
}

// callData is the api_call event's data of a call: who (token id and
// name, tenant) and what (method and route).
func callData(r *http.Request) map[string]string {
	p := auth.From(r.Context())
	d := map[string]string{"method": r.Method, "route": r.Pattern, "tenant": p.Tenant}
	if p.Insecure {
		d["token_id"] = "" // no authentication: --insecure-no-auth
		d["auth"] = "none"
	} else {
		d["token_id"], d["token_name"] = p.TokenID, p.Name
	}
	return d
}

// withAudit returns r carrying its api_call event for the store write of
// kind of (host.AuditAttempt, host.AuditTask) to append in its own
// transaction (host.Audit): the call then costs one durable commit, and
// no crash can leave the change without its record.
func withAudit(r *http.Request, of string) *http.Request {
	return r.WithContext(host.WithAudit(r.Context(), &host.Audit{Type: EventAPICall, Data: callData(r), Of: of}))
}

// recordCall appends the api_call event of a state-changing call that
// succeeded, on what (task or attempt id) — unless the store already
// appended it with the call's change (withAudit).
func (s *server) recordCall(r *http.Request, taskID, attemptID string) {
	if host.AuditOf(r.Context()).Written() {
		return
	}
	data, _ := json.Marshal(callData(r))
	if _, err := s.cfg.Backend.AppendEvent(context.WithoutCancel(r.Context()), host.Event{Type: EventAPICall, TaskID: taskID, AttemptID: attemptID, Data: data}); err != nil {
		s.cfg.Log("recording an api_call event failed", "route", r.Pattern, "error", err)
	}
}
