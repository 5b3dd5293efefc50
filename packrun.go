// Package packrun embeds the packrun host in a Go program: open a home
// (a directory holding the store, the compilation cache and the trust
// policy) and invoke nodes, install and export signed packs, run the task
// dispatcher, serve the HTTP API and replay recorded attempts.
//
//	h, err := packrun.Open(ctx, "/var/lib/packrun", packrun.Config{})
//	if err != nil { ... }
//	defer h.Close(ctx)
//	inv, err := h.Invoke(ctx, "vendor.acme.hello@^1", packrun.InvokeRequest{Input: []byte(`{"name":"Ada"}`)})
//
// The CLI (cmd/packrun) and the HTTP API are built on this package only;
// every rule an attempt follows (the limits it runs under, how a pack's
// module is loaded, which ABI versions run, where a task type routes, a
// pack's configuration) is applied here or below, once. See
// docs/ARCHITECTURE.md for the layout and the walk of one invocation.
package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/packrun/packrun/internal/packindex"
	"github.com/packrun/packrun/internal/runs"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/internal/quota"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/internal/store/storecore"
	"github.com/packrun/packrun/runtime"
)

// Config configures a Host. The zero value is ready to use.
type Config struct {
	// Workers is how many tasks the dispatcher runs at once, and how many
	// openwop run nodes execute at once beside them (default 2 each).
	Workers int
	// PoolSize is how many prepared instances the runtime keeps per module
	// (0: the runtime's default).
	PoolSize int
	// RunnerID names this host in task claims and attempts (default
	// "packrun-" and 8 random hex digits).
	RunnerID string
	// Logger receives the host's log lines (default: none).
	Logger hclog.Logger
	// Store is where the host's store lives: "" (the default, and
	// $PACKRUN_STORE unset) for the home's own SQLite database,
	// packrun.db; or a PostgreSQL URL (postgres://user@host:port/db) that
	// several `packrun serve` nodes share (RATIONALE.md, "PostgreSQL"). Either way the home
	// keeps the trust policy, the configuration and the key files; with
	// PostgreSQL, every node must be given the same secret key file.
	Store string
	// LeaseTTL is how long a task claimed from a PostgreSQL store stays
	// its node's without a heartbeat (default 30s; renewed every third of
	// it while the task runs): past it, another node reclaims the task,
	// and a late settlement by the first is refused. The SQLite store
	// ignores it for tasks (one dispatcher claims at a time). An openwop
	// run executing here is held the same way, on either store.
	LeaseTTL time.Duration
	// SecretKeyFile holds the key sealing secret memory values (default
	// $PACKRUN_SECRET_KEY_FILE, else <home>/secret.key).
	SecretKeyFile string
	// HostKeyFile holds the Ed25519 key signing the evidence head
	// checkpoints (default $PACKRUN_HOST_KEY_FILE, else <home>/host.key).
	// Keep it apart from packrun.db where you can.
	HostKeyFile string
	// LogKeyFile holds the Ed25519 key (64 hex digits, mode 0600) that
	// signs the evidence log's checkpoints in place of the host key
	// (default $PACKRUN_LOG_KEY_FILE; none: the host key). Give every
	// node of a PostgreSQL cluster a copy of the same file, so that the
	// log has one verifier key whichever node integrated: the first
	// checkpoint signed records it, and a node given another is refused
	// (README.md, "One log key for a cluster"). It is never created.
	LogKeyFile string
	// LogOrigin is the origin line of the checkpoints LogKeyFile signs
	// (default packrun.local/ and 16 hex digits of the key's hash).
	LogOrigin string
	// TrustFile is the trust policy (default <home>/trust.json).
	TrustFile string
	// MustExist makes Open fail with ErrNoHome when home does not exist,
	// rather than create it: commands that only read should not turn a
	// mistyped path into a new, empty home.
	MustExist bool
	// Observer is told of every attempt, task start and finish, change of
	// the dispatch lock and group commit of the store (metrics and logs:
	// internal/observe); may be nil.
	Observer host.Observer
	// WALReserve is how much of the home's SQLite write-ahead log to write
	// with zeros ahead of use, in the background, once open (default 0:
	// none): each commit's sync then overwrites blocks already on disk
	// instead of growing the file, a third cheaper on this machine kind
	// (sqlite.Options.WALReserve). For a Host that stays open (serve
	// writes 64 MiB, the log's size between checkpoints); a Host opened
	// for one command would write it for nothing. Ignored with a
	// PostgreSQL store.
	WALReserve int64

	// reanchor opens a home whose evidence anchor is lost (Reanchor,
	// RotateHostKey): what Open otherwise refuses with
	// host.ErrUnanchored.
	reanchor bool
	// outbound, if set, performs the guests' outbound HTTP requests
	// (tests: limits and timeouts smaller than the defaults).
	outbound *outbound.Client
	// compileTimeout, if set, replaces the runtime's limit on compiling
	// a module (tests: a large Go module compiled under the race
	// detector on a loaded machine can take longer than the default).
	compileTimeout time.Duration
	// Quotas bound what each tenant can create (see Quotas; the zero
	// value is the defaults).
	Quotas Quotas
}

// Host is one packrun home opened: its store (the only owner of
// packrun.db), the WebAssembly runtime, the adapters and the dispatcher.
// It is safe for concurrent use. Close it when done.
type Host struct {
	home  string
	cfg   Config
	log   hclog.Logger
	store backend
	index *packindex.Index
	// quotas checks what each tenant creates; limited is the store as
	// the API, the CLI and Store's callers create through it (quotas.go).
	quotas  *quota.Keeper
	limited *limited

	packConfig map[string]json.RawMessage // config.json, read at Open
	adapters   *adapters.Registry

	engineOnce sync.Once
	engineErr  error
	rt         *runtime.Runtime
	dispatcher *dispatch.Dispatcher
	started    atomic.Pointer[dispatch.Dispatcher] // the dispatcher, once engine has run

	runs *runs.Scheduler // openwop runs executing here

	closeOnce sync.Once
}

// backend is what a Host needs of its store: every interface of package
// host, and the home's own records — API tokens, the host key that seals
// checkpoints and exports, the installed packs' integrity. internal/store/sqlite
// implements it (the embedded default); the PostgreSQL store will too
// (RATIONALE.md, "PostgreSQL").
type backend interface {
	host.Backend
	host.Anchoring
	host.UsageCounter
	Ping(ctx context.Context) error
	HostPublicKey() (string, error)
	SealDigest(kind, digest string) (*host.Seal, error)
	CheckPackIntegrity(ctx context.Context) error
	CreateToken(ctx context.Context, t *auth.Token) error
	Token(ctx context.Context, id string) (*auth.Token, error)
	Tokens(ctx context.Context) ([]*auth.Token, error)
	RevokeToken(ctx context.Context, id string) (*auth.Token, error)
}

var _ backend = (*sqlite.Store)(nil)

// HostKeyEnv names the environment variable Open reads for
// Config.HostKeyFile when it is empty.
const HostKeyEnv = "PACKRUN_HOST_KEY_FILE"

// Open opens (creating it, owner-only, unless cfg.MustExist) the packrun
// home at home. The runtime is started on first use, so commands that only
// read the store do not pay for it.
func Open(ctx context.Context, home string, cfg Config) (*Host, error) {
	if home == "" {
		return nil, errors.New("open: no home directory given")
	}
	if cfg.MustExist {
		fi, err := os.Stat(home)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s", ErrNoHome, home)
		} else if err != nil {
			return nil, err
		} else if !fi.IsDir() {
			return nil, fmt.Errorf("%w: %s is not a directory", ErrNoHome, home)
		}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("open home: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.SecretKeyFile == "" {
		cfg.SecretKeyFile = os.Getenv(sqlite.SecretKeyEnv)
	}
	if cfg.HostKeyFile == "" {
		cfg.HostKeyFile = os.Getenv(HostKeyEnv)
	}
	if cfg.LogKeyFile == "" {
		cfg.LogKeyFile = os.Getenv(LogKeyEnv)
	}
	logKey, err := logSigner(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.TrustFile == "" {
		cfg.TrustFile = filepath.Join(home, "trust.json")
	}
	if cfg.RunnerID == "" {
		id := host.NewID("") // its last 8 hex digits are random
		cfg.RunnerID = "packrun-" + id[len(id)-8:]
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	h := &Host{home: home, cfg: cfg, log: cfg.Logger}
	h.quotas = quota.New(cfg.Quotas.limits(), func(ctx context.Context) (map[string]host.TenantUsage, error) { return h.store.TenantUsage(ctx) })
	if h.packConfig, err = readPackConfig(filepath.Join(home, PackConfigFile)); err != nil {
		return nil, err
	}
	acfg, err := adapters.LoadConfig(filepath.Join(home, adapters.ConfigFileName))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if h.adapters, err = adapters.NewRegistry(acfg, filepath.Join(home, adapters.EvidenceDirName)); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var onCommit func(int, time.Duration)
	if cfg.Observer != nil {
		onCommit = cfg.Observer.WriterCommit
	}
	if cfg.Store == "" {
		cfg.Store = os.Getenv(StoreEnv)
	}
	switch {
	case cfg.Store == "":
		h.store, err = sqlite.Open(ctx, filepath.Join(home, "packrun.db"), sqlite.Options{
			OnCommit: onCommit,
			// Artifacts live apart from pack blobs: uninstall sweeps
			// blobs/sha256 of anything no installed pack refers to.
			BlobDir:       filepath.Join(home, "artifacts", "sha256"),
			PackBlobDir:   filepath.Join(home, "blobs", "sha256"),
			SecretKeyFile: cfg.SecretKeyFile,
			HostKeyFile:   cfg.HostKeyFile,
			Reanchor:      cfg.reanchor,
			Quotas:        h.quotas,
			LogSigner:     logKey,
			WALReserve:    cfg.WALReserve,
		})
	case isPostgresURL(cfg.Store):
		h.store, err = openPostgres(ctx, home, cfg, h.quotas, logKey)
	default:
		err = fmt.Errorf("%w: store %s: want a postgres:// URL, or nothing for the home's own SQLite database", ErrConfig, redactURL(cfg.Store))
	}
	if errors.Is(err, storecore.ErrLogKey) {
		return nil, fmt.Errorf("%w: log key %s: %v", ErrConfig, cfg.LogKeyFile, err)
	}
	if err != nil {
		return nil, err
	}
	h.cfg = cfg
	h.limited = &limited{backend: h.store, q: h.quotas}
	h.index = packindex.New(h.store)
	h.runs = runs.New(runs.Config{
		Store: h.store, Packs: h.index, RunnerID: cfg.RunnerID, LeaseTTL: cfg.LeaseTTL, Workers: cfg.Workers, Log: h.log,
		Invoke: h.invokeRequest,
		Replay: func(ctx context.Context, attemptID string) (*ReplayVerdict, error) {
			return h.Replay(ctx, attemptID, ReplayOptions{})
		},
	})
	return h, nil
}

// DefaultLeaseTTL is Config.LeaseTTL's default.
const DefaultLeaseTTL = 30 * time.Second

// Home is the directory the host was opened on.
func (h *Host) Home() string { return h.home }

// Store is the host's store, as the interfaces of package host: tasks,
// attempts and events, memory, task types, installed packs. What a tenant
// creates through it (tasks, schedules, workflow records, sensor events,
// messages) is checked against Config.Quotas first.
func (h *Host) Store() host.Backend { return h.limited }

// engine starts the runtime and the dispatcher, once.
func (h *Host) engine(ctx context.Context) (*runtime.Runtime, *dispatch.Dispatcher, error) {
	h.engineOnce.Do(func() {
		cache := filepath.Join(h.home, "cache")
		if err := os.MkdirAll(cache, 0o700); err != nil {
			h.engineErr = err
			return
		}
		rc := runtime.NewConfig().WithCacheDir(cache).WithPoolSize(h.cfg.PoolSize)
		if h.cfg.compileTimeout > 0 {
			rc = rc.WithModuleLimits(runtime.ModuleLimits{CompileTimeout: h.cfg.compileTimeout})
		}
		rt, err := runtime.New(ctx, rc)
		if err != nil {
			h.engineErr = err
			return
		}
		h.rt = rt
		h.dispatcher = dispatch.New(dispatch.Config{
			Backend: h.store, Packs: h.index, Runtime: rt, Adapters: h.adapters,
			PackConfig: h.packConfig,
			Workers:    h.cfg.Workers, RunnerID: h.cfg.RunnerID,
			Log:         func(msg string, kv ...any) { h.log.Info(msg, kv...) },
			Observer:    h.cfg.Observer,
			Outbound:    h.cfg.outbound,
			CheckIntent: h.CheckIntent,
			Reclaim:     h.runs.Continue,
			Chores:      h.chores,
			BeforeFire:  func(ctx context.Context) { _ = h.quotas.Refresh(ctx) }, // on failure, the counts last read
			CheckFollowUps: func(ctx context.Context, tenant string, n int) error {
				return h.quotas.Tasks(ctx, tenant, n)
			},
		})
		h.started.Store(h.dispatcher)
	})
	return h.rt, h.dispatcher, h.engineErr
}

// Runtime returns the host's WebAssembly runtime, starting it if needed.
func (h *Host) Runtime(ctx context.Context) (*runtime.Runtime, error) {
	rt, _, err := h.engine(ctx)
	return rt, err
}

// Close stops the runtime and closes the store. Calling it again does
// nothing.
func (h *Host) Close(ctx context.Context) error {
	var err error
	h.closeOnce.Do(func() {
		h.runs.Stop()
		if h.dispatcher != nil {
			h.dispatcher.Close(ctx)
		}
		if h.rt != nil {
			h.rt.Close(ctx)
		}
		err = h.store.Close()
	})
	return err
}

// PackConfigFile is the file in the home holding each pack's
// configuration ({"<pack name>": {...}}), what config_get reads.
const PackConfigFile = "config.json"

// readPackConfig reads the pack configuration file; a missing file is an
// empty configuration, a malformed one an ErrConfig naming it.
func readPackConfig(path string) (map[string]json.RawMessage, error) {
	b, err := ReadFile(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("%w: %s: want an object of pack names to their configuration: %v", ErrConfig, path, err)
	}
	return all, nil
}
