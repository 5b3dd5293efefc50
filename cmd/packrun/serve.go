package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/internal/heapfloor"
	"github.com/packrun/packrun/internal/observe"
)

// maxWorkers bounds --workers: each task running holds an instance and
// its linear memory (up to the node's limit), so a slip of the keyboard
// should not ask for a hundred thousand.
const maxWorkers = 1024

func (a *app) serveCommand() *cobra.Command {
	var addr string
	var workers int
	var metricsToken string
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7070] [--workers 8]",
		Short: "Run the dispatcher and the HTTP API",
		Long: `Run the dispatcher (claims the next available task, invokes the node its task type
maps to, records the attempt, applies the outcome, schedules retries) and the HTTP API:

  POST /v1/tasks            enqueue a TaskIntent ({"task_type":...,"payload":{...},"priority":...})
  GET  /v1/tasks[/{id}]     list / show tasks         POST /v1/tasks/{id}:cancel
  GET  /v1/attempts/{id}    one recorded attempt      POST /v1/invoke  run a node now
  GET  /v1/packs            installed packs           GET  /.well-known/packrun  host capabilities

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

One dispatcher per store holds the dispatch lock; a second one waits as a standby (it
says so) and takes over when the first stops. Tasks a crash left running are reclaimed
at start. SIGTERM or Ctrl-C stops claiming, lets in-flight tasks
finish, and exits.

The process keeps a 64 MiB heap floor so that Go's garbage collector does not run a
hundred times a second on its small live heap (up to 64 MiB more memory, much more
throughput; see RATIONALE.md). Setting GOGC or GOMEMLIMIT turns the floor off.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if workers < 1 || workers > maxWorkers {
				return withCode(exitUsage, fmt.Errorf("--workers %d: must be between 1 and %d", workers, maxWorkers))
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
			h, err := a.open(ctx, readWrite, packrun.Config{PoolSize: 2, Workers: workers, Observer: obs})
			if err != nil {
				return stopped(err)
			}
			defer h.Close(context.Background())
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("--addr %s: %w", addr, err))
			}
			// On a loopback address, requests must name a loopback Host
			// (DNS rebinding); the listener's address is the one --addr
			// resolved to.
			handler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: ln.Addr().String()})
			if err != nil {
				ln.Close()
				return stopped(err)
			}
			handler = observed(obs, h, handler)
			// A client gets 10 s for its headers and a minute for its
			// whole request (bodies are capped too), and an idle
			// keep-alive connection is closed after two minutes, so slow
			// or silent clients cannot hold connections open for ever.
			// No write timeout: POST /v1/invoke answers when the node
			// does, within the node's own time limit.
			srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
			serveErr := make(chan error, 1)
			go func() { serveErr <- srv.Serve(ln) }()
			a.log.Info("serving", "addr", ln.Addr().String(), "home", a.home)
			fmt.Fprintf(a.stderr, "packrun serving on http://%s (home %s)\n", ln.Addr(), a.home)

			dispatchCtx, stopDispatch := context.WithCancel(ctx)
			defer stopDispatch()
			dispatchDone := make(chan error, 1)
			go func() { dispatchDone <- h.Run(dispatchCtx) }()
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
				<-dispatchDone
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
	cmd.Flags().StringVar(&metricsToken, "metrics-token", "", "bearer token /metrics, /healthz and /readyz require (default: none needed)")
	cmd.Flags().IntVar(&workers, "workers", 8, "tasks run at once (they mostly wait on durable commits, so more than the cores helps)")
	return cmd
}

// observed routes /metrics, /healthz and /readyz to the observer and
// everything else to the API, and logs and counts every request.
func observed(obs *observe.Observer, h *packrun.Host, apiHandler http.Handler) http.Handler {
	oh := obs.Handler(observe.Source{
		Tasks: h.Store().CountTasks,
		Packs: func(ctx context.Context) (int, error) {
			p, err := h.Packs(ctx)
			return len(p), err
		},
		Ping:        h.Ping,
		Dispatching: h.Dispatching,
	})
	mux := http.NewServeMux()
	for _, p := range observe.Paths {
		mux.Handle(p, oh)
	}
	mux.Handle("/", apiHandler)
	return obs.Middleware(mux)
}
