package api

import (
	"net/http"
	"strings"
)

// openwop's error envelope (spec/v1/rest-endpoints.md, "Error response
// shape"): {"error": code, "message", "details"?}, exactly these three
// keys. The openwop routes answer their refusals in it, packrun's own
// routes in errorBody; wrap picks one by the request's path, so every
// refusal, including those of the authentication layer and an unknown
// path under an openwop prefix, is written by writeError.

// openwopErrorBody is openwop's error envelope.
type openwopErrorBody struct {
	Error   string               `json:"error"`
	Message string               `json:"message"`
	Details *openwopErrorDetails `json:"details,omitempty"`
}

// openwopErrorDetails is the envelope's details: the field at fault, and
// for a 429 (rest-endpoints.md, "429 Too Many Requests envelope") the
// wait in milliseconds (Retry-After in seconds, rounded up) and which
// limit fired: "key" a token's rate, "tenant" a tenant quota.
type openwopErrorDetails struct {
	Field        string `json:"field,omitempty"`
	RetryAfterMs int    `json:"retryAfterMs,omitempty"`
	Scope        string `json:"scope,omitempty"`
	// Supported lists the values a refused option takes (a bad
	// ?streamMode=).
	Supported []string `json:"supported,omitempty"`
}

// openwop's names of the refusals it names; packrun's other codes
// (conflict, too_large, idempotency_key_mismatch...) are sent as they are.
const (
	owCodeUnauthenticated = "unauthenticated"
	owCodeValidation      = "validation_error"
	owCodeRateLimited     = "rate_limited"
	owCodeInternal        = "internal_error"
)

var openwopCodes = map[string]string{
	CodeUnauthorized: owCodeUnauthenticated,
	CodeBadRequest:   owCodeValidation,
	CodeInvalid:      owCodeValidation,
	CodeInternal:     owCodeInternal,
}

// openwopRoute reports whether path is one of openwop's routes: its
// discovery, its run API, packrun's openwop workflow registration and
// its pack registry read API (/v1/packs/...; packrun's GET /v1/packs is
// not one).
func openwopRoute(path string) bool {
	return path == "/.well-known/openwop" || path == "/v1/runs" || strings.HasPrefix(path, "/v1/runs/") ||
		strings.HasPrefix(path, "/v1/runs:") || path == "/v1/openwop" || strings.HasPrefix(path, "/v1/openwop/") ||
		strings.HasPrefix(path, "/v1/packs/")
}

// openwopError is ae in openwop's envelope.
func openwopError(ae *apiError) openwopErrorBody {
	b := openwopErrorBody{Error: ae.detail.Code, Message: ae.detail.Message}
	if c, ok := openwopCodes[b.Error]; ok {
		b.Error = c
	}
	var d openwopErrorDetails
	d.Field = ae.detail.Field
	if ae.status == http.StatusTooManyRequests {
		b.Error = owCodeRateLimited
		d.RetryAfterMs = ae.retryAfter * 1000
		d.Scope = "key"
		if ae.detail.Code == CodeQuotaExceeded {
			d.Scope = "tenant"
		}
	}
	d.Supported = ae.supported
	if d.Field != "" || d.RetryAfterMs != 0 || d.Scope != "" || len(d.Supported) > 0 {
		b.Details = &d
	}
	return b
}

// writeError writes ae, in openwop's envelope on the openwop routes and
// in packrun's on the others.
func writeError(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if openwopRoute(r.URL.Path) {
		reply(w, ae.status, openwopError(ae))
		return
	}
	reply(w, ae.status, errorBody{Error: ae.detail})
}
