package packrun

import (
	"context"
	"net/http"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/buildinfo"
	"github.com/packrun/packrun/internal/console"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/runtime"
)

// HeapFloor is the heap floor a process whose main work is a Host's
// dispatcher should keep (internal/heapfloor): measured with
// BenchmarkEvidenceCost, it lifts attempts with full evidence by about 45 %.
const HeapFloor = dispatch.HeapFloor

// Run runs the dispatcher until ctx is done: it takes the store's
// dispatch lock (waiting while another dispatcher holds it), reclaims the
// tasks a crash left running, then claims tasks, invokes the node each
// task type routes to, records the attempt and settles the task. When ctx
// is done it stops claiming, lets in-flight tasks finish and returns nil.
// On a PostgreSQL store, where several nodes claim, it takes no lock to
// claim: each claimed task is held under a lease (Config.LeaseTTL) that
// Run renews while the task runs, and the tasks whose lease expired are
// reclaimed at start and every half lease.
func (h *Host) Run(ctx context.Context) error {
	_, d, err := h.engine(ctx)
	if err != nil {
		return err
	}
	if err := h.routeAllTaskTypes(ctx); err != nil {
		return err
	}
	return d.Run(ctx)
}

// Dispatching reports whether this host's dispatcher is dispatching:
// false before Run; on the home's SQLite store, whether it holds the
// dispatch lock (false while another packrun on the same home holds it
// and this one waits as a standby); on a PostgreSQL store, where every
// node claims, whether Run is running.
func (h *Host) Dispatching() bool {
	d := h.started.Load()
	return d != nil && d.HoldsLock()
}

// Ping checks that the store takes writes (an empty write transaction
// commits and is synced, and the writer has not failed).
func (h *Host) Ping(ctx context.Context) error { return h.store.Ping(ctx) }

// HandlerOptions configure Handler.
type HandlerOptions struct {
	// Addr is the address the server listens on (its listener's Addr()):
	// on a loopback address, requests must name a loopback Host (a web
	// page whose DNS name is rebound to 127.0.0.1 cannot reach the API).
	Addr string
	// MaxBodyBytes caps a request body (default 1 MiB).
	MaxBodyBytes int64
	// InsecureNoAuth serves every request without a token, with every
	// scope, for the tenant it names (packrun serve --insecure-no-auth:
	// for a laptop, on loopback only). Otherwise every route needs one of
	// this home's tokens (CreateToken).
	InsecureNoAuth bool
	// RateLimit bounds each token's requests a second (burst: twice as
	// many), API and console together; 0: no limit.
	RateLimit float64
	// Witnessing serves GET /v1/evidence/checkpoint/cosigned (serve
	// --witness); nil: that route answers 404.
	Witnessing api.Witnessing
	// PublicPackRegistry serves openwop's pack registry read API without
	// a token (serve --public-pack-registry).
	PublicPackRegistry bool
}

// Handler is the HTTP API (/v1/tasks, /v1/attempts, /v1/invoke, /v1/packs,
// /.well-known/packrun) and the operator console (/console/) as an
// http.Handler. It starts the runtime.
func (h *Host) Handler(ctx context.Context, opts HandlerOptions) (http.Handler, error) {
	rt, d, err := h.engine(ctx)
	if err != nil {
		return nil, err
	}
	authenticate := h.Authenticate
	if opts.InsecureNoAuth {
		// Any token logs in, as the default tenant with every scope.
		authenticate = func(context.Context, string) (*Principal, error) {
			return &Principal{Insecure: true, Tenant: host.DefaultTenant}, nil
		}
	}
	// One bucket per token, spent by the API and the console alike.
	limit := auth.NewLimiter(opts.RateLimit, 0)
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, api.GuardHost(opts.Addr, console.New(console.Config{
		Backend:      consoleBackend{h},
		Authenticate: authenticate,
		Log:          func(msg string, kv ...any) { h.log.Error(msg, kv...) },
		Limiter:      limit,
	})))
	mux.Handle("/", h.apiHandler(rt, d, opts, limit))
	return mux, nil
}

func (h *Host) apiHandler(rt *runtime.Runtime, d *dispatch.Dispatcher, opts HandlerOptions, limit *auth.Limiter) http.Handler {
	build := buildinfo.Read()
	cfg := api.Config{
		Backend:       h.limited,
		Dispatcher:    apiInvoker{h, d},
		Packs:         h.index.PackInfos,
		Skills:        h.Skills,
		CheckIntent:   h.CheckIntent,
		Enqueue:       h.Enqueue,
		CheckWorkflow: h.CheckWorkflow,
		TaskTypes:     h,
		Agents:        h,
		Runs:          h,
		Host:          rt.Host(),
		Build:         &build,
		MaxBodyBytes:  opts.MaxBodyBytes,
		Addr:          opts.Addr,
		Log:           func(msg string, kv ...any) { h.log.Error(msg, kv...) },
		Auth:          api.Auth{Authenticate: h.Authenticate, Insecure: opts.InsecureNoAuth, Limiter: limit},
		Witnessing:    opts.Witnessing,
		Replay: func(ctx context.Context, id string) (*api.ReplayVerdict, error) {
			return h.Replay(ctx, id, ReplayOptions{})
		},
	}
	cfg.PublicPackRegistry = opts.PublicPackRegistry
	return api.New(cfg)
}

// Enqueue checks an intent (host.ValidateIntent, then CheckIntent: what it
// names must exist here), adds the task to the queue and wakes this host's
// dispatcher (a dispatcher in another process finds it on its next poll).
func (h *Host) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	if err := host.ValidateIntent(&intent); err != nil {
		return nil, err
	}
	if err := h.CheckIntent(ctx, &intent); err != nil {
		return nil, err
	}
	t, err := h.limited.Enqueue(ctx, intent, opts)
	if err != nil {
		return nil, err
	}
	h.wake()
	return t, nil
}

// wake tells this host's running dispatcher, if any, that a task may be
// available.
func (h *Host) wake() {
	if d := h.started.Load(); d != nil {
		d.Wake()
	}
}

// apiInvoker serves POST /v1/invoke through the Host, so an API request is
// checked and defaulted (tenant, limits, attempt) exactly as any other.
type apiInvoker struct {
	h *Host
	d *dispatch.Dispatcher
}

func (a apiInvoker) Invoke(ctx context.Context, r dispatch.InvokeRequest) (*host.Attempt, *runtime.Result, error) {
	return a.h.invokeRequest(ctx, r)
}

// invokeRequest runs req (its Pack an installed pack) as InvokePack does:
// what the API and the openwop run scheduler call.
func (h *Host) invokeRequest(ctx context.Context, req InvokeRequest) (*host.Attempt, *runtime.Result, error) {
	inv, err := h.InvokePack(ctx, req.Pack, req)
	if err != nil {
		return nil, nil, err
	}
	return inv.Attempt, inv.Result, nil
}

func (a apiInvoker) Wake() { a.d.Wake() }
