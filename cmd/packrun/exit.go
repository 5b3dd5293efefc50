package main

import (
	"errors"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

// Exit codes: the CLI contract, documented in the README and in
// `packrun --help`. exitCodes is the one table that maps errors to them.
const (
	exitOK        = 0
	exitOther     = 1  // anything else: the store failed, a file could not be written...
	exitFailed    = 2  // the node failed (traps included)
	exitSuspended = 3  // the node suspended (openwop_interrupt)
	exitBreached  = 4  // the node hit a limit
	exitRefused   = 5  // refused: module, pack, signature, trust, trace, evidence bundle, tampered evidence, a lost evidence anchor, input (inputSchema)
	exitDiverged  = 6  // a replay diverged
	exitUsage     = 64 // the command line is wrong (sysexits EX_USAGE)
	exitNotFound  = 66 // a file, pack, node, task, attempt or key that does not exist (EX_NOINPUT)
	exitUnavail   = 69 // a resource the command needs is unavailable: a busy or forbidden listen address (EX_UNAVAILABLE)
	exitConfig    = 78 // a configuration file in the home is malformed (EX_CONFIG)
)

// exitCodes maps error classes to exit codes, first match wins. An
// *exitError (a command that decided its own code) comes before any of
// these.
var exitCodes = []struct {
	code int
	is   func(error) bool
}{
	{exitBreached, func(err error) bool {
		le, ok := errors.AsType[*runtime.LoadError](err)
		return ok && le.Breach != nil // initialisation hit a limit
	}},
	{exitNotFound, isAny(packrun.ErrNotFound, packrun.ErrNoHome, host.ErrPackNotInstalled, host.ErrNotFound,
		runtime.ErrUnknownNode, registry.ErrNotFound)},
	{exitUsage, isAny(packrun.ErrUsage, host.ErrValidation, host.ErrTooLarge)},
	{exitConfig, isAny(packrun.ErrConfig)},
	{exitRefused, isRuleError}, // an agent message its spec's or the bus's rules refuse
	{exitRefused, isAny(runtime.ErrRefused, registry.ErrUntrusted, packs.ErrInvalidPack, packs.ErrInvalidManifest,
		host.ErrPackConflict, host.ErrConflict, host.ErrTampered, packrun.ErrRegistryRefused, host.ErrUnanchored, packrun.ErrInvalidTrace, packrun.ErrInvalidBundle, packrun.ErrInputRefused)},
}

// isRuleError reports whether err is an agent message refused by a rule
// of its spec or of the bus (internal/message.RuleError).
func isRuleError(err error) bool {
	_, ok := errors.AsType[*message.RuleError](err)
	return ok
}

func isAny(targets ...error) func(error) bool {
	return func(err error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
}

// exitCode is the exit code for err (nil: 0).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	if isUsage(err) {
		return exitUsage
	}
	for _, c := range exitCodes {
		if c.is(err) {
			return c.code
		}
	}
	return exitOther
}
