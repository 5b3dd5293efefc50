package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/packrun/packrun/host"
)

// commandTree is every command of the CLI, root first.
func commandTree() []*cobra.Command {
	a := &app{}
	var all []*cobra.Command
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(a.rootCommand())
	return all
}

// eachFlag calls f with every flag of every command (its own and the
// persistent ones it inherits).
func eachFlag(t *testing.T, f func(c *cobra.Command, fl *pflag.Flag)) {
	t.Helper()
	for _, c := range commandTree() {
		c.Flags().VisitAll(func(fl *pflag.Flag) { f(c, fl) })
	}
}

// Every duration flag is the CLI's own (host.ParseDuration), so "2d" works
// wherever a duration does: a new flag defined with pflag's DurationVar
// fails here.
func TestDurationFlagsTakeDays(t *testing.T) {
	n := 0
	eachFlag(t, func(c *cobra.Command, fl *pflag.Flag) {
		if fl.Value.Type() != "duration" {
			return
		}
		n++
		v, ok := fl.Value.(*durationValue)
		if !ok {
			t.Errorf("%s --%s: a %T, not the CLI's durationValue (use durationVar)", c.CommandPath(), fl.Name, fl.Value)
			return
		}
		if err := v.Set("2d"); err != nil || time.Duration(*v) != 2*host.Day {
			t.Errorf("%s --%s 2d: %v, %v", c.CommandPath(), fl.Name, time.Duration(*v), err)
		}
	})
	if n < 7 {
		t.Fatalf("found %d duration flags; the walk missed some", n)
	}
}

// Every --since takes an RFC 3339 time or a duration back from now.
func TestSinceFlagsTakeTimeOrDuration(t *testing.T) {
	n := 0
	eachFlag(t, func(c *cobra.Command, fl *pflag.Flag) {
		if fl.Name != "since" {
			return
		}
		n++
		if _, ok := fl.Value.(*sinceValue); !ok {
			t.Errorf("%s --since: a %T, not the CLI's sinceValue (use sinceVar)", c.CommandPath(), fl.Value)
			return
		}
		for _, v := range []string{"2026-01-02T15:04:05Z", "1h", "7d"} {
			if err := fl.Value.Set(v); err != nil {
				t.Errorf("%s --since %s: %v", c.CommandPath(), v, err)
			}
		}
		if err := fl.Value.Set("yesterday"); err == nil {
			t.Errorf("%s --since yesterday: accepted", c.CommandPath())
		}
	})
	if n < 3 {
		t.Fatalf("found %d --since flags; the walk missed some", n)
	}
}

// The durations end to end: the flags that read durations as text, and a
// few through their commands.
func TestDurationsEndToEnd(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	h.ok("memory", "put", "k", `1`, "--namespace", "notes", "--ttl", "30d")
	if out := h.ok("memory", "get", "k", "--namespace", "notes"); strings.TrimSpace(out) != "1" {
		t.Fatalf("memory get: %q", out)
	}
	h.ok("tokens", "create", "--tenant", "acme", "--scopes", "invoke", "--expires", "1d12h")
	h.ok("events", "--since", "7d")
	h.ok("events", "--since", "2026-01-02T15:04:05Z")
	h.ok("attempts", "list", "--since", "2026-01-02T15:04:05Z")
	h.ok("attempts", "list", "--since", "1d")
	for _, args := range [][]string{{"events", "--since", "yesterday"}, {"attempts", "list", "--since", "-1h"}, {"memory", "put", "k", "1", "--namespace", "n", "--ttl", "1w"}} {
		if code, _, errs := h.run(args...); code != exitUsage || !strings.Contains(errs, `"`+args[len(args)-2]+`" flag`) {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
