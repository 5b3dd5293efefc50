package api

import (
	"errors"
	"math"
	"net/http"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/quota"
)

// Error codes of the error envelope {"error":{"code","message","field"}}.
const (
	CodeBadRequest           = "bad_request"            // 400: not JSON, not an object, cut short, bad query parameter
	CodeInvalid              = "invalid"                // 400: a field is invalid (or not UTF-8, or a duplicate key); "field" names it
	CodeNotFound             = "not_found"              // 404: no such task, attempt, pack, node or route
	CodeMethodNotAllowed     = "method_not_allowed"     // 405: see the Allow header
	CodeConflict             = "conflict"               // 409: the request does not fit the current state
	CodeQuotaExceeded        = "quota_exceeded"         // 409 (a count) or 429 (a rate, Retry-After): a tenant quota; the message names it, its limit and its flag
	CodeTooLarge             = "too_large"              // 413: body or payload over its limit
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a body without Content-Type application/json
	CodeMisdirected          = "misdirected_request"    // 421: Host is not a loopback name, to a server on a loopback address
	CodeUnknownTaskType      = "unknown_task_type"      // 422: no installed pack serves the task type
	CodeAmbiguousTaskType    = "ambiguous_task_type"    // 422: several packs serve it and no override chooses
	CodeModuleRefused        = "module_refused"         // 422: the runtime refused to load the pack's module
	CodeInputSchema          = "input_schema_violation" // 422: the node's inputSchema refused the input; "field" is its path
	CodeUnsupported          = "unsupported"            // 422: valid, but not something packrun does (an openwop construct it cannot execute); "field" names it
	CodeUnavailable          = "unavailable"            // 503: the service is not configured, is closing, or has no disk space left (Retry-After)
	CodeInternal             = "internal"               // 500: a host error; details are logged, not returned
)

// errorBody is the error envelope.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	// Path and Rule, for a refused agent message (POST /v1/messages): the
	// JSON path at fault ("$.metadata.source") and the rule it breaks
	// (a seed's error code, SIGNATURE_INVALID, TOPIC_NOT_ALLOWED...).
	Path string `json:"path,omitempty"`
	Rule string `json:"rule,omitempty"`
}

// apiError is a refusal with its status; handlers return it and the
// router writes it.
type apiError struct {
	status     int
	detail     errorDetail
	cause      error    // logged for 5xx, never sent
	retryAfter int      // seconds, for a Retry-After header; 0: none
	supported  []string // the values a refused option takes (openwop's details.supported)
}

func (e *apiError) Error() string { return e.detail.Message }

func refuse(status int, code, field, msg string) *apiError {
	return &apiError{status: status, detail: errorDetail{Code: code, Message: msg, Field: field}}
}

// fromHost maps an error of a host service to its status. Messages of
// caller errors are the host's own (they name the field and the caller's
// data only); anything else becomes a generic 5xx.
func fromHost(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if qe, ok := errors.AsType[*quota.Error](err); ok {
		return quotaError(qe)
	}
	field := ""
	var he *host.Error
	if errors.As(err, &he) {
		field = he.Field
	}
	switch {
	case errors.Is(err, host.ErrNotFound):
		return refuse(http.StatusNotFound, CodeNotFound, field, err.Error())
	case errors.Is(err, host.ErrOutOfRange): // before ErrValidation, which it wraps
		return refuse(http.StatusUnprocessableEntity, CodeInvalid, field, err.Error())
	case errors.Is(err, host.ErrValidation):
		return refuse(http.StatusBadRequest, CodeInvalid, field, err.Error())
	case errors.Is(err, host.ErrUnsupported):
		return refuse(http.StatusUnprocessableEntity, CodeUnsupported, field, err.Error())
	case errors.Is(err, host.ErrTooLarge):
		return refuse(http.StatusRequestEntityTooLarge, CodeTooLarge, field, err.Error())
	case errors.Is(err, host.ErrConflict):
		return refuse(http.StatusConflict, CodeConflict, field, err.Error())
	case errors.Is(err, host.ErrClosed):
		return &apiError{status: http.StatusServiceUnavailable, detail: errorDetail{Code: CodeUnavailable, Message: "the store is closing; try again"}, cause: err}
	case errors.Is(err, host.ErrUnavailable):
		return &apiError{status: http.StatusServiceUnavailable, detail: errorDetail{Code: CodeUnavailable,
			Message: "the store has no disk space left; nothing was stored; try again later"}, cause: err, retryAfter: 30}
	}
	return internal(err)
}

func internal(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, detail: errorDetail{Code: CodeInternal, Message: "internal error; see the server log"}, cause: err}
}

// quotaError is a tenant quota's refusal: 409 for a count, 429 for a
// rate (with Retry-After); nothing was stored.
func quotaError(qe *quota.Error) *apiError {
	status, field := http.StatusConflict, ""
	if qe.Quota == quota.ScheduleMinInterval {
		field = "interval_seconds"
	}
	ae := refuse(status, CodeQuotaExceeded, field, qe.Error())
	if qe.Rate() {
		ae.status = http.StatusTooManyRequests
		ae.retryAfter = max(1, int(math.Ceil(qe.RetryAfter.Seconds())))
	}
	return ae
}
