package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
)

// Prefix is the path the console is mounted at.
const Prefix = "/console/"

// CookieName is the cookie holding the operator's token.
const CookieName = "packrun_console"

// maxFormBytes bounds a form body (a token, a filter).
const maxFormBytes = 64 << 10

// PackView is one installed pack: its record (version, signer,
// provenance) and its decoded manifest (nodes, grants).
type PackView struct {
	Pack     *host.InstalledPack
	Manifest *packs.Manifest
}

// Backend is what the console reads and acts on. Every tenant-bound call
// takes the tenant of the principal explicitly; an implementation must
// return only that tenant's tasks and attempts (another tenant's task or
// attempt is host.ErrNotFound), and the tenant argument overrides
// f.Tenant. Errors matching host.ErrNotFound, host.ErrConflict and
// host.ErrValidation are shown to the operator; others are logged and
// shown as an internal error.
type Backend interface {
	// Packs lists the installed packs (they are not tenant-bound).
	Packs(ctx context.Context) ([]PackView, error)
	// Tasks lists the tenant's tasks, newest first.
	Tasks(ctx context.Context, tenant string, f host.TaskFilter) ([]*host.TaskRecord, error)
	Task(ctx context.Context, tenant, id string) (*host.TaskRecord, error)
	// CancelTask is host.Queue.Cancel of one of the tenant's tasks.
	CancelTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error)
	// Attempts lists the tenant's attempts, newest first.
	Attempts(ctx context.Context, tenant string, f host.AttemptFilter) ([]*host.Attempt, error)
	Attempt(ctx context.Context, tenant, id string) (*host.Attempt, error)
	// Replay re-executes one of the tenant's attempts with no side effects.
	Replay(ctx context.Context, tenant, attemptID string) (*replay.Verdict, error)
	// Chain verifies the whole evidence chain.
	Chain(ctx context.Context) (*host.ChainReport, error)
	// Counts counts the tenant's tasks by status, its attempts, its
	// messages and their deliveries by status.
	Counts(ctx context.Context, tenant string) (*host.TenantCounts, error)
	// Schedules lists the tenant's schedules ("": every tenant's, for a
	// server without authentication, as the API does), by name.
	Schedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error)
	// WorkflowRecords lists workflow records, newest first (f.Tenant "":
	// every tenant's, as for Schedules).
	WorkflowRecords(ctx context.Context, f host.WorkflowRecordFilter) ([]*host.WorkflowRecord, error)
	// WorkflowRecord returns one of the tenant's workflow records, its
	// definition and the transitions it made.
	WorkflowRecord(ctx context.Context, tenant, id string) (*WorkflowView, error)
	// Events lists runtime events in chain order; f.Tenant "" selects
	// every tenant's and the host's own (the operator scope's view).
	Events(ctx context.Context, f host.EventFilter) ([]*host.Event, error)
}

// WorkflowView is one workflow record as its page shows it.
type WorkflowView struct {
	Record *host.WorkflowRecord
	// Definition is the record's workflow definition (nil when it was
	// removed).
	Definition *host.WorkflowDefinition
	// Transitions are the record's workflow_transitioned events, oldest
	// first; Partial says the search for them stopped at its bound.
	Transitions []*host.Event
	Partial     bool
}

// TaskRetrier is a Backend that can retry a task: the console shows a
// Retry button only when its Backend implements it.
type TaskRetrier interface {
	RetryTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error)
}

// TaskResumer is a Backend that can resume a task (a blocked one whose
// attempt suspended) with a value, the JSON the node's openwop_interrupt
// returns: the console shows a Resume button, with a field for the value
// (empty means null), only when its Backend implements it.
type TaskResumer interface {
	ResumeTask(ctx context.Context, tenant, id string, value json.RawMessage) (*host.TaskRecord, error)
}

// Config configures the console. Backend and Authenticate are required.
type Config struct {
	Backend Backend
	// Authenticate turns a presented token into the principal it acts as,
	// or refuses it (an error, or a nil principal). It is called on every
	// request.
	Authenticate func(ctx context.Context, token string) (*auth.Principal, error)
	// Log receives one line per request that failed with a 5xx, with the
	// error the operator does not see; may be nil.
	Log func(msg string, kv ...any)
	// Limiter bounds each token's requests (a page, a button, a login, a
	// live refresh): over it, 429 with Retry-After. Hand it the API's, so
	// that a token has one budget on both surfaces. Nil: no limit.
	Limiter *auth.Limiter
	// Refresh is how often a list page's script polls it for its live
	// parts: 0 is DefaultRefresh, negative never.
	Refresh time.Duration
}

// DefaultRefresh is how often a page refreshes its live parts.
const DefaultRefresh = 3 * time.Second

//go:embed templates/*.html static/console.css static/live.js
var files embed.FS

type server struct {
	cfg      Config
	pages    map[string]*page
	retrier  TaskRetrier
	resumer  TaskResumer
	messages MessageReader // nil: no Messages pages
}

// New returns the console's handler, to be mounted at Prefix: it serves
// every path under it. "/console/" redirects to the tasks page, or to the
// login page without a valid token.
func New(cfg Config) http.Handler {
	if cfg.Log == nil {
		cfg.Log = func(string, ...any) {}
	}
	if cfg.Refresh == 0 {
		cfg.Refresh = DefaultRefresh
	}
	s := &server{cfg: cfg, pages: parsePages()}
	s.retrier, _ = cfg.Backend.(TaskRetrier)
	s.resumer, _ = cfg.Backend.(TaskResumer)
	s.messages, _ = cfg.Backend.(MessageReader)

	static, _ := fs.Sub(files, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+Prefix+"{$}", s.root)
	mux.HandleFunc("GET "+Prefix+"login", s.loginForm)
	mux.HandleFunc("POST "+Prefix+"login", s.login)
	mux.HandleFunc("POST "+Prefix+"logout", s.logout)
	mux.HandleFunc("GET "+Prefix+"packs", s.authed("", s.packs))
	mux.HandleFunc("GET "+Prefix+"tasks", s.authed(auth.ScopeTasksRead, s.tasks))
	mux.HandleFunc("GET "+Prefix+"tasks/{id}", s.authed(auth.ScopeTasksRead, s.task))
	mux.HandleFunc("POST "+Prefix+"tasks/{id}/{action}", s.authed(auth.ScopeTasksWrite, s.taskAction))
	mux.HandleFunc("GET "+Prefix+"attempts", s.authed(auth.ScopeEvidenceRead, s.attempts))
	mux.HandleFunc("GET "+Prefix+"attempts/{id}", s.authed(auth.ScopeEvidenceRead, s.attempt))
	mux.HandleFunc("POST "+Prefix+"attempts/{id}/replay", s.authed(auth.ScopeEvidenceRead, s.replay))
	mux.HandleFunc("GET "+Prefix+"chain", s.authed(auth.ScopeEvidenceRead, s.chain))
	mux.HandleFunc("GET "+Prefix+"events", s.authed(auth.ScopeEvidenceRead, s.events))
	mux.HandleFunc("GET "+Prefix+"schedules", s.authed(auth.ScopeTasksRead, s.schedules))
	mux.HandleFunc("GET "+Prefix+"workflows", s.authed(auth.ScopeTasksRead, s.workflows))
	mux.HandleFunc("GET "+Prefix+"workflows/{id}", s.authed(auth.ScopeTasksRead, s.workflow))
	if s.messages != nil {
		mux.HandleFunc("GET "+Prefix+"messages", s.authed(auth.ScopeMessagesRead, s.messageList))
		mux.HandleFunc("GET "+Prefix+"messages/{id}", s.authed(auth.ScopeMessagesRead, s.message))
	}
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, nil, http.StatusNotFound, fmt.Sprintf("There is no console page %s (or not for %s).", r.URL.Path, r.Method))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// No script, no frame, no form posting elsewhere.
		// Scripts and fetches: the console's own only (static/live.js).
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := sameOrigin(r); err != nil {
				s.fail(w, r, nil, http.StatusForbidden, err.Error())
				return
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// sameOrigin refuses a request whose Origin (or, without one, Referer)
// names another host than the request's: with the cookie's
// SameSite=Strict and the form token, a page elsewhere cannot make the
// operator's browser act.
func sameOrigin(r *http.Request) error {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return nil
	}
	u, err := url.Parse(src)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Errorf("%w: it comes from %q, not from this console (%s)", ErrCrossSite, host.ShortName(src), host.ShortName(r.Host))
	}
	return nil
}

// session is an authenticated request.
type session struct {
	p     *auth.Principal
	token string
}

// formToken is the anti-forgery value of the session's forms: derived
// from the token, which a page elsewhere cannot read.
func (ss *session) formToken() string {
	sum := sha256.Sum256([]byte("packrun-console-form\x00" + ss.token))
	return hex.EncodeToString(sum[:16])
}

func (ss *session) checkForm(r *http.Request) error {
	got := r.PostFormValue("csrf")
	if subtle.ConstantTimeCompare([]byte(got), []byte(ss.formToken())) != 1 {
		return fmt.Errorf("%w: the form's anti-forgery value is missing or wrong; reload the page and try again", ErrCrossSite)
	}
	return nil
}

// authenticate reads and checks the cookie's token.
func (s *server) authenticate(r *http.Request) (*session, error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, errors.New("no token")
	}
	p, err := s.cfg.Authenticate(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errors.New("token refused")
	}
	return &session{p: p, token: c.Value}, nil
}

type handler func(w http.ResponseWriter, r *http.Request, ss *session)

// authed runs h for a request whose cookie holds a valid token with
// scope (any valid token when scope is ""); POSTs must also carry the
// session's form token. Without a valid token it redirects to the login
// page.
func (s *server) authed(scope auth.Scope, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, err := s.authenticate(r)
		if err != nil {
			clearCookie(w, r)
			if r.Method == http.MethodGet {
				http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			} else {
				http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
			}
			return
		}
		if s.overRate(w, r, ss) {
			return
		}
		if scope != "" && !ss.p.Has(scope) {
			s.fail(w, r, ss, http.StatusForbidden, fmt.Sprintf("This token (%s) does not have the %q scope this page needs.", tokenName(ss.p), scope))
			return
		}
		if r.Method == http.MethodPost {
			if err := ss.checkForm(r); err != nil {
				s.fail(w, r, ss, http.StatusForbidden, err.Error())
				return
			}
		}
		h(w, r, ss)
	}
}

func tokenName(p *auth.Principal) string {
	switch {
	case p.Name != "":
		return p.Name
	case p.TokenID != "":
		return p.TokenID
	}
	return "unnamed"
}

func setCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: token, Path: Prefix, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
}

func (s *server) root(w http.ResponseWriter, r *http.Request) {
	ss, err := s.authenticate(r)
	if err != nil {
		http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
		return
	}
	if s.overRate(w, r, ss) {
		return
	}
	http.Redirect(w, r, Prefix+"tasks", http.StatusSeeOther)
}

// next is where to go after logging in: a console path only.
func next(v string) string {
	if strings.HasPrefix(v, Prefix) && !strings.HasPrefix(v, "//") && !strings.ContainsAny(v, "\\\r\n") {
		return v
	}
	return Prefix + "tasks"
}

func (s *server) loginForm(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", nil, map[string]any{"Next": next(r.URL.Query().Get("next"))})
}

func (s *server) login(w http.ResponseWriter, r *http.Request) {
	token := strings.TrimSpace(r.PostFormValue("token"))
	dest := next(r.PostFormValue("next"))
	var p *auth.Principal
	var err error
	if token != "" {
		p, err = s.cfg.Authenticate(r.Context(), token)
	}
	if token == "" || err != nil || p == nil {
		s.render(w, r, http.StatusUnauthorized, "login", nil, map[string]any{"Next": dest,
			"Error": "That token was not accepted: it is unknown, revoked, expired or not a packrun token."})
		return
	}
	if s.overRate(w, r, &session{p: p}) {
		return
	}
	setCookie(w, r, token)
	http.Redirect(w, r, dest, http.StatusSeeOther)
}

func (s *server) logout(w http.ResponseWriter, r *http.Request) {
	clearCookie(w, r)
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// overRate spends one request of the session's token from the limiter
// the console shares with the API; over it, it renders the 429 page (with
// Retry-After) and reports true.
func (s *server) overRate(w http.ResponseWriter, r *http.Request, ss *session) bool {
	ok, retryAfter := s.cfg.Limiter.Take(ss.p)
	if ok {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	if ss.token == "" { // logging in: not logged in yet
		ss = nil
	}
	s.fail(w, r, ss, http.StatusTooManyRequests, fmt.Sprintf(
		"This token is over its rate of %g requests a second, counted across the console and the API; nothing was done. Try again in %d s.",
		s.cfg.Limiter.Rate(), retryAfter))
	return true
}

// fail renders an error page with status; a 5xx logs err.
func (s *server) fail(w http.ResponseWriter, r *http.Request, ss *session, status int, msg string) {
	s.render(w, r, status, "error", ss, map[string]any{"Status": status, "StatusText": http.StatusText(status), "Message": msg})
}

// failErr renders a Backend error: the operator's mistakes as such,
// anything else as an internal error, logged.
func (s *server) failErr(w http.ResponseWriter, r *http.Request, ss *session, what string, err error) {
	switch {
	case errors.Is(err, host.ErrNotFound):
		s.fail(w, r, ss, http.StatusNotFound, fmt.Sprintf("%s: not found (or not of tenant %q).", what, ss.p.Tenant))
	case errors.Is(err, host.ErrConflict):
		s.fail(w, r, ss, http.StatusConflict, fmt.Sprintf("%s: %v", what, err))
	case errors.Is(err, host.ErrValidation), errors.Is(err, host.ErrTooLarge):
		s.fail(w, r, ss, http.StatusBadRequest, fmt.Sprintf("%s: %v", what, err))
	default:
		s.cfg.Log("console request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		s.fail(w, r, ss, http.StatusInternalServerError, what+": internal error (the server's log has the cause).")
	}
}
