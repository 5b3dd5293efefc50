package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/sqlite"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

// hostEnv is everything a command that runs or records attempts needs.
type hostEnv struct {
	backend    *sqlite.Store
	store      *registry.Store
	rt         *runtime.Runtime
	dispatcher *dispatch.Dispatcher
}

func (e *hostEnv) Close(ctx context.Context) {
	if e.dispatcher != nil {
		e.dispatcher.Close(ctx)
	}
	if e.rt != nil {
		e.rt.Close(ctx)
	}
	if e.store != nil {
		e.store.Close()
	}
	if e.backend != nil {
		e.backend.Close()
	}
}

// makeHome creates the home if it is missing, readable by its owner only:
// it holds the database, the secret key and the evidence.
func (a *app) makeHome() error { return os.MkdirAll(a.home, 0o700) }

func (a *app) openBackend(ctx context.Context) (*sqlite.Store, error) {
	if err := a.makeHome(); err != nil {
		return nil, err
	}
	return openHomeStore(ctx, a.home)
}

// openHomeStore opens the host store of a packrun home. Secret memory
// values are sealed with the key in $PACKRUN_SECRET_KEY_FILE, or else in
// <home>/secret.key.
func openHomeStore(ctx context.Context, home string) (*sqlite.Store, error) {
	// Artifacts live apart from pack blobs: the registry sweeps
	// blobs/sha256 of anything no installed pack refers to.
	return sqlite.Open(ctx, filepath.Join(home, "packrun.db"), sqlite.Options{
		BlobDir:       filepath.Join(home, "artifacts", "sha256"),
		SecretKeyFile: os.Getenv(sqlite.SecretKeyEnv),
	})
}

// openHost opens the host store, the pack store, a runtime and a dispatcher.
func (a *app) openHost(ctx context.Context, poolSize, workers int) (*hostEnv, error) {
	e := &hostEnv{}
	var err error
	if e.backend, err = a.openBackend(ctx); err != nil {
		return nil, err
	}
	if e.store, err = a.openStore(ctx); err != nil {
		e.Close(ctx)
		return nil, err
	}
	if e.rt, err = a.newRuntime(ctx, poolSize); err != nil {
		e.Close(ctx)
		return nil, err
	}
	cfg, err := adapters.LoadConfig(filepath.Join(a.home, adapters.ConfigFileName))
	if err != nil {
		e.Close(ctx)
		return nil, withCode(exitUsage, err)
	}
	reg, err := adapters.NewRegistry(cfg, filepath.Join(a.home, adapters.EvidenceDirName))
	if err != nil {
		e.Close(ctx)
		return nil, err
	}
	e.dispatcher = dispatch.New(dispatch.Config{
		Backend: e.backend, Packs: &storePacks{st: e.store}, Runtime: e.rt, Adapters: reg,
		PackConfig: a.packConfig, Workers: workers,
		Log: func(msg string, kv ...any) { a.log.Info(msg, kv...) },
	})
	return e, nil
}

// packConfig reads $PACKRUN_HOME/config.json: {"<pack name>": {...}}.
func (a *app) packConfig(pack string) json.RawMessage {
	b, err := readFileLimited(filepath.Join(a.home, "config.json"), 1<<20)
	if err != nil {
		return nil
	}
	var all map[string]json.RawMessage
	if json.Unmarshal(b, &all) != nil {
		return nil
	}
	return all[pack]
}

// storePacks opens installed packs for the dispatcher, keeping each
// archive (immutable, by digest) once read.
type storePacks struct {
	st    *registry.Store
	mu    sync.Mutex
	cache map[string]*packs.Archive
}

func (p *storePacks) Open(ctx context.Context, ref string) (*packs.Archive, error) {
	inst, err := p.st.Resolve(ctx, ref)
	if errors.Is(err, registry.ErrNotInstalled) {
		return nil, fmt.Errorf("%w: %v", dispatch.ErrPackNotInstalled, err)
	}
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	arch, ok := p.cache[inst.SHA256]
	p.mu.Unlock()
	if ok {
		return arch, nil
	}
	if arch, err = p.st.Open(ctx, inst); err != nil {
		return nil, err
	}
	p.mu.Lock()
	if p.cache == nil {
		p.cache = map[string]*packs.Archive{}
	}
	p.cache[inst.SHA256] = arch
	p.mu.Unlock()
	return arch, nil
}

// syncTaskTypes feeds the task-type registry from the newest installed
// version of every pack (operator overrides still win).
func syncTaskTypes(ctx context.Context, st *registry.Store, b host.TaskTypes) error {
	all, err := st.List(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range all { // newest version first per name
		if seen[p.Name] {
			continue
		}
		seen[p.Name] = true
		m, err := packs.DecodeManifest(p.Manifest)
		if err != nil {
			return fmt.Errorf("%s: %w", p.Ref(), err)
		}
		var routes []host.TaskTypeRoute
		for _, n := range m.Nodes {
			for _, tt := range n.TaskTypes {
				routes = append(routes, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: p.Name, Node: n.TypeID})
			}
		}
		if err := b.SetPackTaskTypes(ctx, p.Name, routes); err != nil {
			return fmt.Errorf("%s: %w", p.Ref(), err)
		}
	}
	return nil
}

// withBackend runs f with the host store open.
func (a *app) withBackend(cmd *cobra.Command, f func(b *sqlite.Store) error) error {
	b, err := a.openBackend(cmd.Context())
	if err != nil {
		return err
	}
	defer b.Close()
	return f(b)
}
