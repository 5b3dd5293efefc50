package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/packrun/packrun/internal/packindex"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/buildinfo"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/internal/strictjson"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// DefaultMaxBodyBytes is the request body limit when Config.MaxBodyBytes
// is zero.
const DefaultMaxBodyBytes = 1 << 20

// MaxListLimit is the largest limit a list request may ask for.
const MaxListLimit = 10_000

// Config configures the handler. Backend is required; without Dispatcher,
// POST /v1/invoke answers 503 and enqueued tasks wait for the next poll;
// without Packs, no pack is listed and invoke does not check the name first.
type Config struct {
	Backend host.Backend
	// Dispatcher serves POST /v1/invoke and is woken after an enqueue: the
	// Host (which checks the request and applies its defaults first), or a
	// bare *dispatch.Dispatcher in tests.
	Dispatcher Invoker
	// Packs lists the installed packs.
	Packs func(ctx context.Context) ([]PackInfo, error)
	// CheckIntent checks what an intent names (skills, adapter, profile,
	// model) against the home before it is enqueued (Host.CheckIntent);
	// nil checks only that its task type is served.
	CheckIntent func(ctx context.Context, in *host.TaskIntent) error
	// Enqueue is POST /v1/tasks's one write (Host.Enqueue: it checks the
	// intent against the home, adds the task with the call's api_call
	// event in the same store write, and wakes the dispatcher). nil: the
	// checks of CheckIntent, Backend.Enqueue, then Dispatcher.Wake.
	Enqueue func(ctx context.Context, in host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error)
	// CheckWorkflow checks what a workflow definition names (profiles,
	// skills) before POST /v1/workflows stores it (Host.CheckWorkflow);
	// nil checks nothing more than the definition's own rules.
	CheckWorkflow func(ctx context.Context, def *host.WorkflowDefinition) error
	// Agents serves GET /v1/agents and /v1/profiles (nil: empty lists).
	Agents AgentService
	// TaskTypes serves /v1/task-types (nil: 503).
	TaskTypes TaskTypeService
	// Skills lists the installed skills (nil: none).
	Skills func(ctx context.Context) ([]packs.InstalledSkill, error)
	// Host describes the runtime ((*runtime.Runtime).Host()).
	Host runtime.HostInfo
	// Build describes the binary, in GET /.well-known/packrun (omitted
	// when nil).
	Build *buildinfo.Info
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// Addr is the address the server listens on (its listener's Addr()).
	// When it is a loopback address (127.0.0.0/8, ::1, localhost), or
	// empty, a request is served only if its Host header names a loopback
	// host — localhost, 127.x.x.x or [::1], with any port — and is
	// refused with 421 otherwise: a web page whose DNS name is rebound to
	// 127.0.0.1 cannot reach the API. Bound to another address, the API is
	// reachable from the network anyway, and Host is not checked.
	Addr string
	// Log receives one line per request that failed with a 5xx, with the
	// error the client does not see; may be nil.
	Log func(msg string, kv ...any)
	// Auth says who may call: every route needs a bearer token unless
	// Auth.Insecure.
	Auth Auth
	// Witnessing serves GET /v1/evidence/checkpoint/cosigned (nil: 404,
	// no witness configured).
	Witnessing Witnessing
	// Runs serves openwop's run API and /.well-known/openwop (nil: 503).
	Runs RunService
	// Replay serves POST /v1/attempts/{id}:replay (without it, 503): it
	// checks the stored attempt against the evidence chain and re-executes
	// it with every host call served from its trace.
	Replay func(ctx context.Context, attemptID string) (*ReplayVerdict, error)
	// PublicPackRegistry serves openwop's pack registry read API
	// (openwopregistry.go) without a token, as openwop's registry clients
	// read it (serve --public-pack-registry); otherwise it needs a token
	// of any scope, as GET /v1/packs does.
	PublicPackRegistry bool
}

// ReplayVerdict is what a replay found (internal/replay.Verdict).
type ReplayVerdict = replay.Verdict

// Invoker runs one node of an installed pack outside the queue and
// records the attempt; Wake tells idle workers a task may be available.
type Invoker interface {
	Invoke(ctx context.Context, req dispatch.InvokeRequest) (*host.Attempt, *runtime.Result, error)
	Wake()
}

// PackInfo is one installed pack as GET /v1/packs lists it.
type PackInfo = packindex.PackInfo

type server struct {
	cfg     Config
	limit   *auth.Limiter // nil: no rate limit
	maxBody int64
	// loopback: refuse requests whose Host is not a loopback name.
	loopback bool
	routes   []string // "METHOD /path", as registered (Routes)
	// meta is what each route's scoped and takes enforce, keyed like
	// routes (described at registration; see describeRoute).
	meta map[string]*routeMeta
}

// maxBodyDepth bounds the nesting of a request body; it is encoding/json's
// own limit.
const maxBodyDepth = 10000

// New returns the handler of the packrun HTTP API. Routes:
//
//	POST /v1/tasks[?max_attempts=N]             tasks:write    enqueue a TaskIntent → 201 TaskRecord
//	GET  /v1/tasks[?status=&task_type=&cursor=&limit=]  tasks:read  {"tasks":[TaskRecord...],"next_cursor":C}, newest first
//	GET  /v1/tasks/{id}                         tasks:read     TaskRecord
//	POST /v1/tasks/{id}:cancel                  tasks:write    TaskRecord after the cancel
//	POST /v1/tasks/{id}:resume                  tasks:write    {"value":JSON} → TaskRecord, pending again (a task
//	                                            blocked by its node's openwop_interrupt; 409 otherwise)
//	POST /v1/tasks/{id}:retry                   tasks:write    TaskRecord, pending again (permanent_failure,
//	                                            retryable_failure or blocked; 409 otherwise)
//	GET  /v1/tasks/{id}/events                  evidence:read  {"events":[Event...]}, the task's runtime events
//	GET  /v1/events[?type=&task_id=&since=&cursor=&limit=]  evidence:read  {"events":[Event...],"next_cursor":C}, chain order;
//	                                            pass next_cursor as cursor for the next page (after/next_after:
//	                                            deprecated aliases); the token's tenant's
//	                                            events only (admin too); every tenant's and the host's own
//	                                            (dispatch_*, task types, ...) need the operator scope
//	GET  /v1/attempts[?task_id=&pack=&since=&cursor=&limit=]  evidence:read  {"attempts":[Attempt...],"next_cursor":C}, newest first
//	GET  /v1/attempts/{id}                      evidence:read  Attempt (the evidence record)
//	POST /v1/attempts/{id}:replay               evidence:read  ReplayVerdict (no side effects)
//	GET  /v1/artifacts/{id}                     evidence:read  Artifact
//	GET  /v1/memory/{namespace}[?prefix=]       memory:read    {"keys":[...]}
//	GET  /v1/memory/{namespace}/{key}           memory:read    Entry
//	PUT  /v1/memory/{namespace}/{key}[?ttl=]    memory:write   {"value":...} → Entry
//	DELETE /v1/memory/{namespace}/{key}         memory:write   204
//	POST /v1/schedules                          tasks:write    {"name","interval_seconds","task":TaskIntent,"enabled"?} → 201 RecurringSchedule
//	GET  /v1/schedules                          tasks:read     {"schedules":[RecurringSchedule...]}, by name
//	GET  /v1/schedules/{id}                     tasks:read     RecurringSchedule ({id}: its id or name)
//	PATCH /v1/schedules/{id}                    tasks:write    {"enabled"?,"interval_seconds"?,"task"?} → RecurringSchedule
//	DELETE /v1/schedules/{id}                   tasks:write    the deleted RecurringSchedule (the tasks it created stay)
//	POST /v1/sensor-events                      tasks:write    a SensorEvent → 201 SensorEventRecord (task_id: its proposed_task),
//	                                                           200 a duplicate's record (status deduped), 422 invalid or expired
//	POST /v1/messages                           messages:write an agent message (the three message specs: BlackRoad envelope, AgentOS, AICO), its format named by
//	                                                           Content-Type: application/json; profile=agent-envelope|agent-message|
//	                                                           bus-envelope (the body is the document) or by the publish form
//	                                                           {"format","message","signature"?} → 201 {"message":MessageRecord,
//	                                                           "tasks":[id...],"duplicate":false}, 200 the same with duplicate true
//	                                                           for a resent message (nothing created), 422 refused by a rule (error
//	                                                           .path, .rule), 403 a topic its sender may not use, 409 an id reused
//	                                                           with other content, 413 over host.MaxMessageBytes (256 KiB)
//	GET  /v1/messages[?topic=&from=&reply_to=&dead=true&cursor=&limit=]  messages:read  {"messages":[MessageRecord...],"next_cursor":C},
//	                                                           oldest first; topic is a pattern (crisis.*); pass next_cursor as cursor (after/next: deprecated aliases)
//	GET  /v1/messages/{id}[?format=|?view=record]  messages:read  the document in format (default its own) with Content-Type
//	                                                           application/json; profile=<format> and Packrun-Lost-Fields: what the
//	                                                           format cannot carry; view=record: the MessageRecord (deliveries)
//	GET  /v1/workflows                          tasks:read     {"workflows":[WorkflowDefinition...]}, by workflow_type
//	POST /v1/workflows                          admin          a WorkflowDefinition → 201 (200: it replaced one of that type)
//	GET  /v1/workflows/{type}                   tasks:read     WorkflowDefinition
//	POST /v1/workflows/{type}/records           tasks:write    {"instance_key","state"?,"context"?} → 201 WorkflowRecord (its first
//	                                                           state's task enqueued), 200 the tenant's existing record of that key
//	GET  /v1/workflow-records[?type=&limit=]    tasks:read     {"workflow_records":[WorkflowRecord...]}, newest first
//	GET  /v1/workflow-records/{id}              tasks:read     WorkflowRecord
//	POST /v1/workflow-records/{id}:cancel       tasks:write    WorkflowRecord, canceled (409 completed or canceled already)
//	POST /v1/invoke                             invoke         run one node of an installed pack
//	GET  /v1/packs                              (any token)    {"packs":[PackInfo...]}
//	GET  /v1/task-types                         tasks:read     {"task_types":[TaskTypeInfo...]}
//	GET  /v1/task-types/{type}                  tasks:read     TaskTypeInfo (spec, routes, the route that wins)
//	PUT  /v1/task-types/{type}                  admin          TaskTypeSpec [+ "pack","node": the route] → TaskTypeInfo
//	DELETE /v1/task-types/{type}                admin          204: spec and operator route removed
//	GET  /v1/agents                             tasks:read     {"agents":[AgentRecord...]}: agent, wallets, constitution
//	GET  /v1/profiles                           tasks:read     {"profiles":[SubagentProfile...]}
//	GET  /v1/skills                             (any token)    {"skills":[InstalledSkill...]}: the installed skills and their SkillManifest
//	GET  /.well-known/packrun                   (any token)    host capabilities
//	GET  /.well-known/openwop                   (no token)     openwop discovery: nodePackRuntimes.wasm (RFC 0008 §H) at
//	                                            the root and under capabilities, loadedPacks, fixtures runnable here (with
//	                                            a valid token, also its tenant's registered definitions); errors on
//	                                            the openwop routes are openwop's {error, message, details} (openwoperrors.go)
//	POST /v1/openwop/workflows                  tasks:write    openwop's published definition, or {workflowId, nodes:[{id,
//	                                            typeId}]} → 201: nodes core.* or installed pack typeIds (422 unsupported
//	                                            naming a construct packrun cannot execute; openwopdef.go)
//	POST /v1/runs                               invoke         {workflowId, inputs?, configurable?: {recursionLimit}} → 201
//	                                            {runId}; the run executes in the background (400 naming a node's typeId
//	                                            no installed pack provides)
//	GET  /v1/runs/{id}                          tasks:read     Run {runId, status: running|completed|failed|cancelled, ...}
//	GET  /v1/runs/{id}/events                   tasks:read     {"events":[{seq, type, nodeId, payload, data, at}...]}
//	                                            (Accept: text/event-stream: SSE until terminal, ?streamMode=, Last-Event-ID; sse.go)
//	POST /v1/runs/{id}/cancel, {id}:cancel      invoke         {reason?} → Run, cancelled (409 once terminal)
//	POST /v1/runs/{id}:fork                     invoke         {mode:"replay", fromSeq?} → 201 {runId, sourceRunId, fromSeq,
//	                                            mode, status, eventsUrl}: a new run, events before fromSeq copied,
//	                                            each later node's recorded attempt replayed from its trace
//	GET  /v1/runs/{id}/events/poll              tasks:read     ?lastSequence=N&timeout=S → {events (RunEventDoc), isComplete,
//	                                            nextSequence}: events after N, waiting up to S s (max 30) for one
//	POST /v1/runs/{id}/interrupts/{nodeId}      invoke         {resumeValue} → Run, running again: resolves the interrupt a
//	                                            run waiting-approval waits on at nodeId (404 none there, 409 not waiting)
//	GET  /v1/evidence/checkpoint/cosigned       (any token)    CosignedCheckpoint: the newest checkpoint a witness cosigned
//	                                                           (serve --witness) and each witness's state; 404 without one
//	GET  /v1/audit/verify                       evidence:read  ?fromSeq=&toSeq= → {fromSeq, toSeq, chainValid, checkpoints,
//	                                            anomalies}: openwop's audit-log-integrity check of the evidence chain
//	GET  /v1/openapi.json                       (no token)     the OpenAPI 3.1 document of these routes (OpenAPI)
//
// Every route but the publicRoutes (openapi.json, openwop discovery) needs a bearer
// token (Auth) carrying the scope shown: 401
// without a valid one, 403 without the scope, 429 over the token's rate.
// A token acts for its tenant only: tasks, attempts, artifacts, events and
// memory of another tenant answer exactly as if they did not exist, lists
// show the token's tenant's only, and a body or query naming another
// tenant is refused. A state-changing call that succeeds leaves an
// api_call runtime event naming the token.
//
// Errors are {"error":{"code","message","field"}} with a 4xx status for
// the caller's mistakes, and nothing is stored; a 5xx carries a generic
// message and the cause goes to Config.Log.
//
// Before any route: a server on a loopback address answers only requests
// for a loopback Host (421; see Config.Addr), and a request other than
// GET or HEAD must declare any body it has as Content-Type
// application/json (415), so that a web page cannot send one as a form or
// text/plain without the browser asking first (CORS preflight). Bodies are
// strict JSON: valid UTF-8, no duplicate key at any depth (400).
func New(cfg Config) http.Handler {
	_, h := build(cfg)
	return h
}

// Routes lists the routes New registers as ServeMux patterns ("GET
// /v1/tasks/{id}"), in the order registered; a GET route serves HEAD too.
// A test that must cover every route derives its table from it.
func Routes() []string {
	s, _ := build(Config{})
	return s.routes
}

func build(cfg Config) (*server, http.Handler) {
	s := &server{cfg: cfg, maxBody: cfg.MaxBodyBytes, loopback: servesLoopback(cfg.Addr), limit: cfg.Auth.Limiter}
	if s.limit == nil {
		s.limit = auth.NewLimiter(cfg.Auth.Rate, cfg.Auth.Burst)
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.cfg.Log == nil {
		s.cfg.Log = func(string, ...any) {}
	}
	s.meta = map[string]*routeMeta{}
	mux := http.NewServeMux()
	route := func(path string, methods map[string]handler) {
		allow := make([]string, 0, len(methods)+1)
		for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			if methods[m] != nil || m == http.MethodHead && methods[http.MethodGet] != nil {
				allow = append(allow, m)
			}
			if methods[m] != nil {
				s.routes = append(s.routes, m+" "+path)
				s.meta[m+" "+path] = describeRoute(methods[m], m, path)
			}
		}
		for m, h := range methods {
			mux.Handle(m+" "+path, s.wrap(h))
		}
		// The method-less pattern is less specific than the ones above, so
		// it only sees the methods they do not serve.
		allowed := strings.Join(allow, ", ")
		mux.Handle(path, s.wrap(func(w http.ResponseWriter, r *http.Request) error {
			w.Header().Set("Allow", allowed)
			return refuse(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", fmt.Sprintf("%s %s is not supported; allowed: %s", r.Method, r.URL.Path, allowed))
		}))
	}
	route("/v1/tasks", map[string]handler{
		http.MethodGet:  scoped(auth.ScopeTasksRead, takes(s.listTasks, "status", "task_type", "cursor", "limit")),
		http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.enqueue, "max_attempts")),
	})
	route("/v1/tasks/{id}", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.getTask)), http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.taskAction))})
	route("/v1/tasks/{id}/events", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.taskEvents, "limit"))})
	route("/v1/events", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.listEvents, "type", "task_id", "since", "cursor", "after", "limit"))})
	route("/v1/attempts", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.listAttempts, "task_id", "pack", "tenant", "since", "cursor", "limit"))})
	route("/v1/attempts/{id}", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.getAttempt)), http.MethodPost: scoped(auth.ScopeEvidenceRead, takes(s.attemptAction))})
	route("/v1/artifacts/{id}", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.getArtifact))})
	route("/v1/evidence/checkpoint", map[string]handler{http.MethodGet: scoped("", takes(s.evidenceCheckpoint))})
	route("/v1/evidence/proof/inclusion", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.evidenceInclusion, "entry", "size"))})
	route("/v1/evidence/proof/consistency", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.evidenceConsistency, "from", "to"))})
	route("/v1/memory/{namespace}", map[string]handler{http.MethodGet: scoped(auth.ScopeMemoryRead, takes(s.listMemory, "prefix"))})
	route("/v1/memory/{namespace}/{key}", map[string]handler{
		http.MethodGet:    scoped(auth.ScopeMemoryRead, takes(s.getMemory)),
		http.MethodPut:    scoped(auth.ScopeMemoryWrite, takes(s.putMemory, "ttl")),
		http.MethodDelete: scoped(auth.ScopeMemoryWrite, takes(s.deleteMemory)),
	})
	route("/v1/schedules", map[string]handler{
		http.MethodGet:  scoped(auth.ScopeTasksRead, takes(s.listSchedules)),
		http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.createSchedule)),
	})
	route("/v1/schedules/{id}", map[string]handler{
		http.MethodGet:    scoped(auth.ScopeTasksRead, takes(s.getSchedule)),
		http.MethodPatch:  scoped(auth.ScopeTasksWrite, takes(s.patchSchedule)),
		http.MethodDelete: scoped(auth.ScopeTasksWrite, takes(s.deleteSchedule)),
	})
	route("/v1/sensor-events", map[string]handler{http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.postSensorEvent))})
	route("/v1/messages", map[string]handler{
		http.MethodGet:  scoped(auth.ScopeMessagesRead, takes(s.listMessages, "topic", "from", "reply_to", "dead", "cursor", "after", "limit")),
		http.MethodPost: scoped(auth.ScopeMessagesWrite, takes(s.postMessage)),
	})
	route("/v1/messages/{id}", map[string]handler{http.MethodGet: scoped(auth.ScopeMessagesRead, takes(s.getMessage, "format", "view"))})
	route("/v1/invoke", map[string]handler{http.MethodPost: scoped(auth.ScopeInvoke, takes(s.invoke))})
	route("/v1/packs", map[string]handler{http.MethodGet: scoped("", takes(s.listPacks))})
	route("/v1/packs/-/search", map[string]handler{http.MethodGet: scoped("", takes(s.registrySearch, "q"))})
	route("/v1/packs/{name}", map[string]handler{http.MethodGet: scoped("", takes(s.registryCatalog))})
	route("/v1/packs/{name}/-/{file}", map[string]handler{http.MethodGet: scoped("", takes(s.registryFile))})
	route("/v1/task-types", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.listTaskTypes))})
	route("/v1/task-types/{type...}", map[string]handler{
		http.MethodGet:    scoped(auth.ScopeTasksRead, takes(s.getTaskType)),
		http.MethodPut:    scoped(auth.ScopeAdmin, takes(s.putTaskType)),
		http.MethodDelete: scoped(auth.ScopeAdmin, takes(s.deleteTaskType)),
	})
	route("/v1/workflows", map[string]handler{
		http.MethodGet:  scoped(auth.ScopeTasksRead, takes(s.listWorkflows)),
		http.MethodPost: scoped(auth.ScopeAdmin, takes(s.putWorkflow)),
	})
	route("/v1/workflows/{type}", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.getWorkflow))})
	route("/v1/workflows/{type}/records", map[string]handler{http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.startWorkflow))})
	route("/v1/workflow-records", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.listWorkflowRecords, "type", "limit"))})
	route("/v1/workflow-records/{id}", map[string]handler{
		http.MethodGet:  scoped(auth.ScopeTasksRead, takes(s.getWorkflowRecord)),
		http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.workflowRecordAction)),
	})
	route("/v1/agents", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.listAgents))})
	route("/v1/profiles", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.listProfiles))})
	route("/v1/skills", map[string]handler{http.MethodGet: scoped("", takes(s.listSkills))})
	route("/.well-known/packrun", map[string]handler{http.MethodGet: scoped("", takes(s.wellKnown))})
	route("/.well-known/openwop", map[string]handler{http.MethodGet: scoped("", takes(s.withRuns(s.wellKnownOpenwop)))})
	route("/v1/openwop/workflows", map[string]handler{http.MethodPost: scoped(auth.ScopeTasksWrite, takes(s.withRuns(s.putOpenwopWorkflow)))})
	route("/v1/runs", map[string]handler{http.MethodPost: scoped(auth.ScopeInvoke, takes(s.withRuns(s.startRun)))})
	route("/v1/runs/{id}", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.withRuns(s.getRun))), http.MethodPost: scoped(auth.ScopeInvoke, takes(s.withRuns(s.runAction)))})
	route("/v1/runs/{id}/events", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.withRuns(s.runEvents), "streamMode"))})
	route("/v1/runs/{id}/events/poll", map[string]handler{http.MethodGet: scoped(auth.ScopeTasksRead, takes(s.withRuns(s.pollRunEvents), "lastSequence", "timeout"))})
	route("/v1/runs/{id}/cancel", map[string]handler{http.MethodPost: scoped(auth.ScopeInvoke, takes(s.withRuns(s.cancelRun)))})
	route("/v1/runs/{id}/interrupts/{nodeId}", map[string]handler{http.MethodPost: scoped(auth.ScopeInvoke, takes(s.withRuns(s.resolveInterrupt)))})
	route("/v1/evidence/checkpoint/cosigned", map[string]handler{http.MethodGet: scoped("", takes(s.cosignedCheckpoint))})
	route("/v1/audit/verify", map[string]handler{http.MethodGet: scoped(auth.ScopeEvidenceRead, takes(s.auditVerifyRange, "fromSeq", "toSeq"))})
	route("/v1/openapi.json", map[string]handler{http.MethodGet: scoped("", takes(s.openAPI))})
	mux.Handle("/", s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		return refuse(http.StatusNotFound, CodeNotFound, "", fmt.Sprintf("no route %s", r.URL.Path))
	}))
	return s, s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		// A request that has arrived is served whole: net/http cancels its
		// context when the client half-closes the connection (CloseWrite,
		// nc -N), although the client still reads the answer. Every route's
		// work is bounded (limits, timeouts), so nothing is cut short, and
		// a write is stored and answered, or refused, never both.
		// A stream (sse.go) still ends when its client goes: clientContext.
		r = r.WithContext(context.WithValue(context.WithoutCancel(r.Context()), clientCtxKey{}, r.Context()))
		if err := s.admit(r); err != nil {
			return err
		}
		note := auth.NoteFrom(r.Context())
		p := &auth.Principal{Tenant: host.DefaultTenant}
		if _, pattern := mux.Handler(r); !publicRoutes[pattern] && !(cfg.PublicPackRegistry && registryRoutes[pattern]) {
			var err error
			if p, err = s.authenticate(r); err != nil {
				return err
			}
			if note != nil {
				note.Principal = p
			}
			if ok, retryAfter := s.limit.Take(p); !ok {
				ae := refuse(http.StatusTooManyRequests, CodeRateLimited, "", fmt.Sprintf("token %s is over its rate of %g requests a second; retry later", p.TokenID, s.limit.Rate()))
				ae.retryAfter = retryAfter
				return ae
			}
		}
		routed := r.WithContext(auth.With(r.Context(), p))
		mux.ServeHTTP(w, routed)
		if note != nil {
			note.Route = routed.Pattern
		}
		return nil
	})
}

// admit refuses, before it is routed, a request to a loopback server whose
// Host is not a loopback name, and a request that sends a body without
// declaring it JSON.
func (s *server) admit(r *http.Request) error {
	if err := s.checkHost(r); err != nil {
		return err
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 {
			return nil
		}
		return refuse(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "", "a request body needs Content-Type: application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		return refuse(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "", fmt.Sprintf("Content-Type %q is not supported; send application/json", host.ShortName(ct)))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
		return refuse(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "", fmt.Sprintf("charset %q is not supported; JSON is UTF-8", host.ShortName(cs)))
	}
	return nil
}

// checkHost refuses, on a loopback server, a request whose Host is not a
// loopback name.
func (s *server) checkHost(r *http.Request) error {
	if !s.loopback || isLoopbackHost(r.Host) {
		return nil
	}
	addr := s.cfg.Addr
	if addr == "" {
		addr = "a loopback address"
	}
	return refuse(http.StatusMisdirectedRequest, CodeMisdirected, "", fmt.Sprintf(
		"Host %q is not a loopback name; this server listens on %s and answers only requests for localhost, 127.0.0.1 or [::1] (a guard against DNS rebinding)",
		host.ShortName(r.Host), addr))
}

// servesLoopback reports whether a server on addr (its listener's
// address; "" for one not told) guards its Host as a loopback one.
func servesLoopback(addr string) bool { return addr == "" || IsLoopbackAddr(addr) }

// IsLoopbackAddr reports whether a listen address (host:port, or a bare
// host) is a loopback one: 127.0.0.0/8, ::1 or localhost. An empty host
// (":7070", "") is every interface, not loopback.
func IsLoopbackAddr(addr string) bool {
	h := addr
	if hh, _, err := net.SplitHostPort(addr); err == nil {
		h = hh
	}
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && ip.Unmap().IsLoopback()
}

// isLoopbackHost reports whether a Host header names a loopback host:
// localhost, an address in 127.0.0.0/8, or ::1 (in brackets), with or
// without a port.
func isLoopbackHost(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if strings.EqualFold(strings.TrimSuffix(h, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// handler serves one route: it writes its reply itself, or returns the
// error for wrap to write.
type handler func(w http.ResponseWriter, r *http.Request) error

// takes lets h see only requests whose query parameters are among params,
// each given once: a misspelt filter (?task=… for ?task_id=…) would
// otherwise be ignored, and the answer be about everything.
func takes(h handler, params ...string) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		if d := describing(r); d != nil {
			d.params = params
			return nil
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return refuse(http.StatusBadRequest, CodeBadRequest, "", "malformed query string")
		}
		for k, vs := range q {
			if !slices.Contains(params, k) {
				takes := "none"
				if len(params) > 0 {
					takes = strings.Join(params, ", ")
				}
				name := host.ShortName(k)
				return refuse(http.StatusBadRequest, CodeInvalid, name, fmt.Sprintf("unknown query parameter %q; %s takes %s", name, r.Pattern, takes))
			}
			if len(vs) > 1 {
				return refuse(http.StatusBadRequest, CodeInvalid, k, k+": given more than once")
			}
		}
		return h(w, r)
	}
}

func (s *server) wrap(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		ae := fromHost(err)
		if ae.status >= 500 {
			s.cfg.Log("request failed", "method", r.Method, "path", r.URL.Path, "status", ae.status, "error", ae.cause)
		}
		if ae.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ae.retryAfter))
		}
		if ae.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="packrun"`)
		}
		writeError(w, r, ae)
	})
}

// reply writes v as the JSON body.
func reply(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: internal(err).detail})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// readObject reads a request body that must be one JSON object: at most
// maxBody bytes, all of them (a body cut short is not parsed), strict JSON
// (strictjson.Check), an object. admit has checked its Content-Type.
func (s *server) readObject(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.maxBody {
		return nil, refuse(http.StatusRequestEntityTooLarge, CodeTooLarge, "", fmt.Sprintf("request body is over the %d-byte limit", s.maxBody))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			return nil, refuse(http.StatusRequestEntityTooLarge, CodeTooLarge, "", fmt.Sprintf("request body is over the %d-byte limit", mbe.Limit))
		case errors.Is(err, io.ErrUnexpectedEOF) && r.ContentLength > 0:
			return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", fmt.Sprintf("request body ended early: %d of the %d bytes its Content-Length announced arrived", len(b), r.ContentLength))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", fmt.Sprintf("request body ended early, after %d bytes", len(b)))
		}
		return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", "could not read the request body")
	}
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", "request body is empty; send a JSON object")
	}
	if err := strictjson.Check(b, maxBodyDepth); err != nil {
		return nil, bodyError(err)
	}
	if t[0] != '{' {
		return nil, refuse(http.StatusBadRequest, CodeBadRequest, "", "request body must be a JSON object")
	}
	return b, nil
}

// bodyError is the refusal of a body strictjson.Check refused. Invalid
// UTF-8 and a duplicate key name their place as the field ("payload.a").
func bodyError(err error) error {
	var ce *strictjson.CheckError
	if !errors.As(err, &ce) {
		return refuse(http.StatusBadRequest, CodeBadRequest, "", "request body is not valid JSON")
	}
	msg := "request body: " + ce.Error()
	field := strings.TrimPrefix(strings.TrimPrefix(ce.Path, "$"), ".")
	if field != "" && (errors.Is(err, strictjson.ErrInvalidUTF8) || errors.Is(err, strictjson.ErrDuplicateKey)) {
		return refuse(http.StatusBadRequest, CodeInvalid, field, msg)
	}
	return refuse(http.StatusBadRequest, CodeBadRequest, "", msg)
}

// decodeStrict decodes a JSON object into v, refusing unknown fields and
// naming the field at fault.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae // a nested value's own refusal (runConfigurable)
		}
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return refuse(http.StatusBadRequest, CodeInvalid, te.Field, fmt.Sprintf("%s: must be %s", te.Field, jsonKind(te.Type.Kind().String())))
		}
		if f, ok := host.UnknownField(err); ok {
			return refuse(http.StatusBadRequest, CodeInvalid, f, f+": unknown field")
		}
		return refuse(http.StatusBadRequest, CodeBadRequest, "", "request body is not a valid object: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "slice":
		return "an array"
	}
	return "an object"
}

// GuardHost serves next only for requests whose Host the API would
// admit: on a loopback addr, a loopback name (421 otherwise, in the JSON
// error envelope). Pages served beside the API (the console, /metrics) get
// the same guard against DNS rebinding.
func GuardHost(addr string, next http.Handler) http.Handler {
	s := &server{cfg: Config{Addr: addr, Log: func(string, ...any) {}}, loopback: servesLoopback(addr)}
	return s.wrap(func(w http.ResponseWriter, r *http.Request) error {
		if err := s.checkHost(r); err != nil {
			return err
		}
		next.ServeHTTP(w, r)
		return nil
	})
}
