package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/internal/console"
	"github.com/packrun/packrun/internal/heapfloor"
	"github.com/packrun/packrun/internal/observe"
)

// maxWorkers bounds --workers: each task running holds an instance and
// its linear memory (up to the node's limit), so a slip of the keyboard
// should not ask for a hundred thousand.
const maxWorkers = 1024

func (a *app) serveCommand() *cobra.Command {
	var addr, tlsCert, tlsKey string
	var workers int
	var insecure bool
	var rateLimit float64
	var walReserve string
	var quotas quotaFlags
	var metricsToken, runnerID string
	var lease time.Duration
	var witnesses []string
	var logKey, logOrigin string
	var publicRegistry bool
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7070] [--workers 8] [--tls-cert F --tls-key F] [--insecure-no-auth] [--store postgres://... [--lease 30s]]",
		Short: "Run the dispatcher and the HTTP API",
		Long: `Run the dispatcher (claims the next available task, invokes the node its task type
maps to, records the attempt, applies the outcome, schedules retries) and the HTTP API:

  POST /v1/tasks            enqueue a TaskIntent ({"task_type":...,"payload":{...},"priority":...})
  GET  /v1/tasks[/{id}]     list / show tasks         POST /v1/tasks/{id}:cancel
  GET  /v1/attempts/{id}    one recorded attempt      POST /v1/invoke  run a node now
  GET  /v1/packs            installed packs           GET  /.well-known/packrun  host capabilities

Every route needs a bearer token made with 'packrun tokens create' (Authorization: Bearer
<token>); a token acts for its tenant only and carries scopes (see 'packrun tokens --help').
On a loopback address, --insecure-no-auth serves every request without a token, with every
scope, for the tenant a request names: for a laptop only. On any other address serve refuses
to start without an active token. --tls-cert and --tls-key serve HTTPS.

Observability (see README.md, "Observability"):

  GET /metrics   Prometheus metrics: packrun_attempts_total{pack,outcome},
                 packrun_attempt_duration_seconds{pack}, packrun_cap_breaches_total{kind},
                 packrun_queue_tasks{status}, packrun_dispatch_lag_seconds,
                 packrun_store_commit_ops, packrun_store_commit_duration_seconds,
                 packrun_http_requests_total{route,code}, packrun_http_request_duration_seconds{route},
                 packrun_packs_installed, packrun_dispatch_lock_held, packrun_build_info
  GET /healthz   200 {"status":"ok"} while the process is up
  GET /readyz    200 {"status":"ready","role":"dispatcher"|"standby"} when the store takes
                 writes (a standby serves the API too); 503 {"status":"unavailable",...} if not

These three answer without a token unless --metrics-token is given; then they need
"Authorization: Bearer TOKEN" (401 otherwise). With --log-level info, each request is
logged (method, route pattern, status, duration, token id) and each task's start and
finish (task, type, pack, attempt, outcome, duration); --log-format json writes JSON lines.

On the home's SQLite store, one dispatcher holds the dispatch lock; a second one waits as
a standby (it says so) and takes over when the first stops. Tasks a crash left running
are reclaimed at start. SIGTERM or Ctrl-C stops claiming, lets in-flight tasks
finish, and exits.

On a PostgreSQL store (--store postgres://..., or $PACKRUN_STORE), run serve on as many
nodes as you like, each with its own home holding the same secret.key and trust policy:
every node claims. A claimed task is the node's for --lease (default 30s), renewed every
third of it while the task runs; a task whose node died or stalled past its lease is
reclaimed by any node and run again, and the stalled node's late settlement is refused
(its attempt kept as evidence). An openwop run is held by the node executing it the same
way, and continued by another node once its lease runs out. The dispatch lock's holder
runs the singleton chores (sweeping expired memory). --runner-id names the node in claims
and attempts.

  packrun serve --store postgres://packrun@db:5432/packrun --runner-id node-a --lease 30s

--witness URL=VKEY (repeatable) sends every new evidence log checkpoint (at most one a
second) to a C2SP tlog-witness such as 'packrun witness', with the consistency proof
from the last one it cosigned (kept in the home's witness-state.json), checks its
cosignature with VKEY and serves the cosigned checkpoint at GET
/v1/evidence/checkpoint/cosigned. A refusal (a rollback, a rewritten entry, a new host
key) is logged as an error, counted (packrun_witness_refusals_total), recorded as a
witness_refused event and makes /readyz say "degraded"; serve keeps serving.

--log-key FILE (or $PACKRUN_LOG_KEY_FILE) signs the evidence log's checkpoints with the
key in FILE (64 hex digits, mode 0600, never created) instead of this node's host key;
--log-origin NAME names the log (default packrun.local/ and 16 hex digits of the key's
hash). On a PostgreSQL store give every node a copy of one file: the log then has one
origin and verifier key whichever node integrated, for 'evidence verify --checkpoint',
'evidence check' and a witness. The first checkpoint signed records the key; a node
given another is refused at start, and a node given none integrates nothing.

  packrun serve --store postgres://packrun@db:5432/packrun --log-key /etc/packrun/log.key

The process keeps a 64 MiB heap floor so that Go's garbage collector does not run a
hundred times a second on its small live heap (up to 64 MiB more memory, much more
throughput; see RATIONALE.md). Setting GOGC or GOMEMLIMIT turns the floor off.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if workers < 1 || workers > maxWorkers {
				return withCode(exitUsage, fmt.Errorf("--workers %d: must be between 1 and %d", workers, maxWorkers))
			}
			reserve, err := parseSize(walReserve)
			if err != nil {
				return usageError("--wal-reserve: %v", err)
			}
			if rateLimit < 0 {
				return usageError("--rate-limit %g: must be 0 (no limit) or more", rateLimit)
			}
			if lease <= 0 {
				return usageError("--lease %s: must be positive", lease)
			}
			qcfg, err := quotas.config()
			if err != nil {
				return err
			}
			targets, err := parseWitnesses(witnesses)
			if err != nil {
				return err
			}
			if runnerID != "" {
				if err := host.CheckID("serve", "--runner-id", runnerID); err != nil {
					return withCode(exitUsage, err)
				}
			}
			if (tlsCert == "") != (tlsKey == "") {
				return usageError("--tls-cert and --tls-key go together")
			}
			if insecure && !api.IsLoopbackAddr(addr) {
				return usageError("--insecure-no-auth is allowed on a loopback address only (127.0.0.1, [::1], localhost); --addr %s is not one", addr)
			}
			heapfloor.Raise(packrun.HeapFloor)
			// A stop asked for while starting up is a clean stop, not a
			// failure: whatever start-up did is whole (each step commits
			// atomically) or not done.
			stopped := func(err error) error {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			obs := observe.New(observe.Config{Log: a.log, Token: metricsToken, Home: a.home,
				Announce: func(msg string) { fmt.Fprintf(a.stderr, "packrun %s\n", msg) }})
			h, err := a.open(ctx, readWrite, packrun.Config{PoolSize: 2, Workers: workers, Observer: obs, WALReserve: int64(reserve), LeaseTTL: lease, RunnerID: runnerID, Quotas: qcfg,
				LogKeyFile: logKey, LogOrigin: logOrigin})
			if err != nil {
				return stopped(err)
			}
			defer h.Close(context.Background())
			wit, err := a.startWitnessing(h, targets)
			if err != nil {
				return err
			}
			if !insecure {
				active, err := h.HasActiveTokens(ctx)
				if err != nil {
					return err
				}
				switch {
				case !active && !api.IsLoopbackAddr(addr):
					return withCode(exitUsage, fmt.Errorf("refusing to serve on %s without authentication: this home has no active API token (create one with 'packrun tokens create')", addr))
				case !active:
					fmt.Fprintln(a.stderr, "packrun: this home has no active API token, so every request will be refused (401): create one with 'packrun tokens create', or run with --insecure-no-auth")
				}
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return withCode(listenExitCode(err), fmt.Errorf("--addr %s: %w", addr, err))
			}
			// On a loopback address, requests must name a loopback Host
			// (DNS rebinding); the listener's address is the one --addr
			// resolved to.
			opts := packrun.HandlerOptions{Addr: ln.Addr().String(), InsecureNoAuth: insecure, RateLimit: rateLimit, PublicPackRegistry: publicRegistry}
			if wit != nil {
				opts.Witnessing = wit
			}
			handler, err := h.Handler(ctx, opts)
			if err != nil {
				ln.Close()
				return stopped(err)
			}
			handler = observedWith(obs, h, wit, handler, ln.Addr().String())
			// A client gets 10 s for its headers and a minute for its
			// whole request (bodies are capped too), and an idle
			// keep-alive connection is closed after two minutes, so slow
			// or silent clients cannot hold connections open for ever.
			// No write timeout: POST /v1/invoke answers when the node
			// does, within the node's own time limit.
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			serveErr := make(chan error, 1)
			scheme := "http"
			if tlsCert != "" {
				scheme = "https"
				go func() { serveErr <- srv.ServeTLS(ln, tlsCert, tlsKey) }()
			} else {
				go func() { serveErr <- srv.Serve(ln) }()
			}
			authNote := "bearer tokens required"
			if insecure {
				authNote = "NO AUTHENTICATION (--insecure-no-auth)"
			}
			a.log.Info("serving", "addr", ln.Addr().String(), "home", a.home, "tls", tlsCert != "", "auth", !insecure)
			fmt.Fprintf(a.stderr, "packrun serving on %s://%s (home %s; %s)\n", scheme, ln.Addr(), a.home, authNote)
			fmt.Fprintf(a.stderr, "packrun console at %s://%s%s\n", scheme, ln.Addr(), console.Prefix)

			dispatchCtx, stopDispatch := context.WithCancel(ctx)
			defer stopDispatch()
			dispatchDone := make(chan error, 1)
			go func() { dispatchDone <- h.Run(dispatchCtx) }()
			if wit != nil {
				go wit.run(dispatchCtx, a)
			}
			dispatching := true
			select {
			case err = <-serveErr:
			case err = <-dispatchDone:
				dispatching = false
				if err == nil {
					err = ctx.Err()
				}
			case <-ctx.Done():
			}
			shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			srv.Shutdown(shutdown)
			// However serve ends, the dispatcher stops claiming and its
			// in-flight tasks finish before the host is closed under them.
			stopDispatch()
			if dispatching {
				<-dispatchDone //nolint:errcheck // stopped by serve; a failure before that was taken above
			}
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, http.ErrServerClosed) || errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:7070", "listen address")
	cmd.Flags().BoolVar(&insecure, "insecure-no-auth", false, "serve without tokens, every scope, any tenant (loopback addresses only)")
	cmd.Flags().BoolVar(&publicRegistry, "public-pack-registry", false, "serve openwop's pack registry read API (GET /v1/packs/...: the installed packs, their pack.json, signature and archive) without a token, as openwop's registry clients read it")
	cmd.Flags().StringVar(&tlsCert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain)")
	cmd.Flags().StringVar(&tlsKey, "tls-key", "", "the PEM private key of --tls-cert")
	cmd.Flags().StringVar(&walReserve, "wal-reserve", "64MiB", "with the home's SQLite database: how much of its write-ahead log to write ahead of use at start-up, in the background, so that each commit's sync overwrites blocks already on disk instead of growing the file (the default is the log's size between checkpoints; 0: none, as on btrfs or ZFS, which never overwrite in place)")
	cmd.Flags().Float64Var(&rateLimit, "rate-limit", 200, "requests a second each token may make on average (twice as many at once); 0: no limit")
	cmd.Flags().StringVar(&metricsToken, "metrics-token", "", "bearer token /metrics, /healthz and /readyz require (default: none needed)")
	durationVar(cmd.Flags(), &lease, "lease", 30*time.Second, "how long a claimed task (with a postgres store) or an openwop run stays this node's without a heartbeat (renewed every third of it); past it, another node reclaims it")
	cmd.Flags().StringVar(&runnerID, "runner-id", "", `names this node in task claims and attempts (default "packrun-" and 8 random hex digits)`)
	quotas.add(cmd)
	cmd.Flags().StringVar(&logKey, "log-key", "", "sign the evidence log's checkpoints with the key in this file (64 hex digits, mode 0600): the same file on every node of a cluster (default $PACKRUN_LOG_KEY_FILE, else the host key)")
	cmd.Flags().StringVar(&logOrigin, "log-origin", "", "the origin line naming the log whose checkpoints --log-key signs (default packrun.local/ and 16 hex digits of the key's hash)")
	cmd.Flags().StringArrayVar(&witnesses, "witness", nil, "send each evidence log checkpoint to this witness for cosigning: URL=VKEY, the witness's base URL and verifier key (repeatable)")
	cmd.Flags().IntVar(&workers, "workers", 8, "tasks run at once, and openwop run nodes beside them (tasks mostly wait on durable commits, so more than the cores helps)")
	return cmd
}

// observed routes /metrics, /healthz and /readyz to the observer and
// everything else to the API, and logs and counts every request.
//
// listenExitCode is the exit code for a listen that failed: an address
// the system refuses (in use, not this machine's, a privileged port) is an
// unavailable resource (69); anything else (no port, not an address) is a
// wrong command line (64).
func listenExitCode(err error) int {
	if _, ok := errors.AsType[*os.SyscallError](err); ok {
		return exitUnavail
	}
	return exitUsage
}

// On a loopback addr the three answer only requests for a loopback Host,
// as the API does (DNS rebinding).
func observed(obs *observe.Observer, h *packrun.Host, apiHandler http.Handler, addr string) http.Handler {
	return observedWith(obs, h, nil, apiHandler, addr)
}

// observedWith is observed with serve --witness's witnesses in /readyz
// and /metrics.
func observedWith(obs *observe.Observer, h *packrun.Host, wit *witnessing, apiHandler http.Handler, addr string) http.Handler {
	var witnesses func() []observe.WitnessState
	if wit != nil {
		witnesses = wit.observed
	}
	oh := obs.Handler(observe.Source{
		Witnesses: witnesses,
		Tasks:     h.Store().CountTasks,
		Packs: func(ctx context.Context) (int, error) {
			p, err := h.Packs(ctx)
			return len(p), err
		},
		Ping:        h.Ping,
		Dispatching: h.Dispatching,
		Quotas: func(ctx context.Context) []observe.QuotaUsage {
			var out []observe.QuotaUsage
			for _, u := range h.QuotaUsage(ctx) {
				out = append(out, observe.QuotaUsage{Quota: u.Quota, Ratio: u.Ratio, Refusals: u.Refusals})
			}
			return out
		},
	})
	mux := http.NewServeMux()
	oh = api.GuardHost(addr, oh)
	for _, p := range observe.Paths {
		mux.Handle(p, oh)
	}
	mux.Handle("/", apiHandler)
	return obs.Middleware(mux)
}
