package observe

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// Paths are the paths Handler serves; a server routes them to it and
// everything else to the API.
var Paths = []string{"/metrics", "/healthz", "/readyz"}

// Config configures an Observer. The zero value works: no log, no token.
type Config struct {
	// Log receives a line at info per request and per task start and
	// finish, and the dispatch lock's changes (default: none).
	Log hclog.Logger
	// Token, if set, must be presented as "Authorization: Bearer <Token>"
	// on /metrics, /healthz and /readyz; without it they answer anyone.
	Token string
	// Home names the store in the standby message.
	Home string
	// Announce, if set, receives the lines a person running the server
	// should see whatever the log level: this process waits as a standby,
	// or took the dispatch lock over after waiting.
	Announce func(msg string)
}

// Source is what /metrics and /readyz read from the host when asked; any
// nil field is left out (its series absent, its check passed).
type Source struct {
	// Tasks counts the queue's tasks by status (host.Queue.CountTasks).
	Tasks func(ctx context.Context) (map[host.TaskStatus]int, error)
	// Packs counts the installed packs.
	Packs func(ctx context.Context) (int, error)
	// Ping checks that the store takes writes.
	Ping func(ctx context.Context) error
	// Dispatching reports whether this process holds the dispatch lock.
	Dispatching func() bool
	// Quotas reports the tenant quotas' usage, naming no tenant.
	Quotas func(ctx context.Context) []QuotaUsage
	// Witnesses reports the witnesses serve --witness sends checkpoints
	// to; one with a Problem makes /readyz say "degraded".
	Witnesses func() []WitnessState
}

// WitnessState is one witness as /readyz and /metrics show it.
type WitnessState struct {
	URL      string `json:"url"`
	Size     uint64 `json:"size"`
	Refusals uint64 `json:"refusals"`
	Problem  string `json:"problem,omitempty"`
	Refused  bool   `json:"refused,omitempty"`
}

// QuotaUsage is one tenant quota's state across every tenant.
type QuotaUsage struct {
	Quota string
	// Ratio is the highest usage over the limit among the tenants (a
	// count quota; 0 otherwise).
	Ratio float64
	// Refusals counts the quota's refusals since the host opened.
	Refusals uint64
}

// Observer collects metrics and writes the request and task logs. It
// implements host.Observer. It is safe for concurrent use.
type Observer struct {
	cfg       Config
	log       hclog.Logger
	m         *metrics
	src       atomic.Pointer[Source]
	tokenHash [sha256.Size]byte
	// waited: the dispatch lock was found held by another since it was
	// last ours (the next take is a take-over).
	waited atomic.Bool
}

var _ host.Observer = (*Observer)(nil)

// New returns an Observer with a metrics registry of its own.
func New(cfg Config) *Observer {
	o := &Observer{cfg: cfg, log: cfg.Log}
	if o.log == nil {
		o.log = hclog.NewNullLogger()
	}
	if o.cfg.Announce == nil {
		o.cfg.Announce = func(string) {}
	}
	if cfg.Token != "" {
		o.tokenHash = sha256.Sum256([]byte(cfg.Token))
	}
	o.m = newMetrics(o)
	return o
}

// AttemptDone implements host.Observer.
func (o *Observer) AttemptDone(a host.AttemptStats) {
	o.m.attempts.WithLabelValues(a.Pack, a.Outcome).Inc()
	o.m.attemptDuration.WithLabelValues(a.Pack).Observe(a.Duration.Seconds())
	for _, k := range a.Breaches {
		o.m.breaches.WithLabelValues(k).Inc()
	}
}

// OutboundRequest counts one outbound HTTP request that reached the
// network, under the host its grant names (the dispatcher wires it to
// internal/outbound). result is "ok", or the error's kind ("error" when it
// has none).
func (o *Observer) OutboundRequest(grantHost string, sent, received int64, d time.Duration, err error) {
	result := "ok"
	if err != nil {
		result = "error"
		var k interface{ CapKind() string }
		if errors.As(err, &k) && k.CapKind() != "" {
			result = k.CapKind()
		}
	}
	o.m.outRequests.WithLabelValues(grantHost, result).Inc()
	o.m.outBytes.WithLabelValues(grantHost, "sent").Add(float64(sent))
	o.m.outBytes.WithLabelValues(grantHost, "received").Add(float64(received))
	o.m.outDuration.WithLabelValues(grantHost).Observe(d.Seconds())
}

// TaskStarted implements host.Observer.
func (o *Observer) TaskStarted(t host.TaskStats) {
	o.m.lag.Observe(t.Lag.Seconds())
	o.log.Info("task started", "task", t.TaskID, "type", t.TaskType, "attempt", t.Attempt, "lag", t.Lag)
}

// TaskFinished implements host.Observer.
func (o *Observer) TaskFinished(t host.TaskStats) {
	o.log.Info("task finished", "task", t.TaskID, "type", t.TaskType, "pack", t.Pack, "attempt", t.Attempt,
		"outcome", t.Outcome, "status", string(t.Status), "duration", t.Duration)
}

// DispatchLock implements host.Observer.
func (o *Observer) DispatchLock(held bool) {
	if held {
		o.m.lock.Set(1)
		if o.waited.Swap(false) {
			msg := fmt.Sprintf("took over the dispatch lock of %s; dispatching", o.cfg.Home)
			o.log.Info(msg)
			o.cfg.Announce(msg)
		} else {
			o.log.Info("dispatch lock taken; dispatching")
		}
		return
	}
	o.m.lock.Set(0)
	if !o.waited.Swap(true) {
		msg := fmt.Sprintf("standby: another packrun holds the dispatch lock of %s; waiting", o.cfg.Home)
		o.log.Info(msg)
		o.cfg.Announce(msg)
	}
}

// WriterCommit implements host.Observer.
func (o *Observer) WriterCommit(ops int, took time.Duration) {
	o.m.commitOps.Observe(float64(ops))
	o.m.commitDuration.Observe(took.Seconds())
}

// Handler serves GET /metrics (Prometheus text format), GET /healthz and
// GET /readyz, reading src when asked. With Config.Token set, each needs
// it as a bearer token (401 otherwise). Calling Handler again replaces the
// source.
//
//	GET /healthz  200 {"status":"ok"}: the process is up.
//	GET /readyz   200 {"status":"ready","role":"dispatcher"|"standby"}: the
//	              store takes writes; role says whether this process holds
//	              the dispatch lock or waits for it (a standby serves the
//	              API all the same, so it is ready too).
//	              200 {"status":"degraded",...,"witnesses":[...]}: a
//	              witness (serve --witness) refused a checkpoint or cannot
//	              be reached; the node still serves.
//	              503 {"status":"unavailable","role":...,"error":...}: the
//	              store refuses writes.
func (o *Observer) Handler(src Source) http.Handler {
	o.src.Store(&src)
	mux := http.NewServeMux()
	// The token is checked behind the mux, so that a refused request is
	// counted under its route pattern too.
	mux.Handle("GET /metrics", o.guard(promhttp.HandlerFor(o.m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.Handle("GET /healthz", o.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]string{"status": "ok"})
	})))
	mux.Handle("GET /readyz", o.guard(http.HandlerFunc(o.readyz)))
	for _, p := range Paths {
		mux.Handle(p, o.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", "GET, HEAD")
			refuse(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s is not supported; allowed: GET, HEAD", r.Method, p))
		})))
	}
	return mux
}

// guard answers 401 unless the request is authorized.
func (o *Observer) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="packrun metrics"`)
			refuse(w, http.StatusUnauthorized, "unauthorized", "this endpoint needs the metrics token: Authorization: Bearer <token> (serve --metrics-token)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorized reports whether r may read the endpoints: no token is
// configured, or r presents it. The comparison takes the same time
// whatever the presented token is.
func (o *Observer) authorized(r *http.Request) bool {
	if o.cfg.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(strings.TrimSpace(got)))
	return subtle.ConstantTimeCompare(h[:], o.tokenHash[:]) == 1
}

// readiness is the body of GET /readyz.
type readiness struct {
	Status string `json:"status"`
	Role   string `json:"role"`
	Error  string `json:"error,omitempty"`
	// Witnesses, with serve --witness: each witness's state.
	Witnesses []WitnessState `json:"witnesses,omitempty"`
}

func (o *Observer) readyz(w http.ResponseWriter, r *http.Request) {
	src := o.src.Load()
	rd := readiness{Status: "ready", Role: "standby"}
	if src.Dispatching != nil && src.Dispatching() {
		rd.Role = "dispatcher"
	}
	if src.Ping != nil {
		ctx, cancel := context.WithTimeout(r.Context(), scrapeTimeout)
		defer cancel()
		if err := src.Ping(ctx); err != nil {
			o.log.Warn("readyz: the store refuses writes", "error", err)
			rd.Status, rd.Error = "unavailable", "the store refuses writes: "+err.Error()
			w.Header().Set("Retry-After", "5")
			reply(w, http.StatusServiceUnavailable, rd)
			return
		}
	}
	if src.Witnesses != nil {
		// A witness that refused or cannot be reached degrades the
		// node, which still serves (200): its checkpoints go uncosigned.
		rd.Witnesses = src.Witnesses()
		for _, ws := range rd.Witnesses {
			if ws.Problem != "" {
				rd.Status = "degraded"
				if rd.Error == "" {
					rd.Error = "witness " + ws.URL + ": " + ws.Problem
				}
			}
		}
	}
	reply(w, http.StatusOK, rd)
}

// Middleware logs each request at info (method, route, status, duration,
// and the token id when the request carries an auth.Principal) and counts
// it by route pattern and status code. The route is the pattern of the
// ServeMux that served the request ("GET /v1/tasks/{id}"), never the raw
// path, so ids and tenants never become labels; a request no pattern
// matched is "unmatched".
func (o *Observer) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		rec := &recorder{ResponseWriter: w}
		ctx, note := auth.WithNote(r.Context())
		r = r.WithContext(ctx)
		next.ServeHTTP(rec, r)
		took := time.Since(began)
		status := rec.status
		if status == 0 {
			status = http.StatusOK
		}
		// The API routes a copy of the request (carrying its
		// principal) and notes the pattern it matched; other handlers
		// are routed by muxes that set Pattern on this request.
		route := note.Route
		if route == "" {
			route = r.Pattern
		}
		if route == "" {
			route = "unmatched"
		}
		code := strconv.Itoa(status)
		o.m.requests.WithLabelValues(route, code).Inc()
		o.m.requestDuration.WithLabelValues(route).Observe(took.Seconds())
		if !o.log.IsInfo() {
			return
		}
		kv := []any{"method", r.Method, "route", route, "status", status, "duration", took}
		p := note.Principal
		if p == nil {
			p = auth.From(r.Context())
		}
		if p != nil && p.TokenID != "" {
			kv = append(kv, "token", p.TokenID)
		}
		o.log.Info("request", kv...)
	})
}

// recorder keeps the status a handler wrote.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Flush passes a flush on, for handlers that stream.
func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// refuse writes packrun's error envelope {"error":{"code","message"}}.
func refuse(w http.ResponseWriter, status int, code, msg string) {
	reply(w, status, map[string]map[string]string{"error": {"code": code, "message": msg}})
}
