package main

import (
	"context"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
)

// access says whether a command may create the home: commands that only
// read say the home does not exist rather than create an empty one.
type access bool

const (
	readOnly  access = false
	readWrite access = true
)

// open opens the home as a packrun.Host.
func (a *app) open(ctx context.Context, acc access, cfg packrun.Config) (*packrun.Host, error) {
	cfg.MustExist = acc == readOnly
	if cfg.Store == "" {
		cfg.Store = a.store // "": packrun.Open reads $PACKRUN_STORE
	}
	if cfg.Logger == nil {
		cfg.Logger = a.log
	}
	return packrun.Open(ctx, a.home, cfg)
}

// config is the Config of a command that opens the home through one of
// the root package's functions rather than a.open (MustExist is theirs).
func (a *app) config() packrun.Config {
	return packrun.Config{Store: a.store, Logger: a.log}
}

// withHost runs f with the home open.
func (a *app) withHost(cmd *cobra.Command, acc access, f func(h *packrun.Host) error) error {
	ctx := cmd.Context()
	h, err := a.open(ctx, acc, packrun.Config{})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	return f(h)
}

// withBackend runs f with the home's store.
func (a *app) withBackend(cmd *cobra.Command, acc access, f func(b host.Backend) error) error {
	return a.withHost(cmd, acc, func(h *packrun.Host) error { return f(h.Store()) })
}
