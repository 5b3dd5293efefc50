package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/packrun/packrun/host"
)

// durationValue is every duration flag of the CLI: host.ParseDuration's
// syntax, so `30d` works wherever a duration does. pflag's own
// DurationVar is not used (TestDurationFlagsTakeDays walks the command
// tree for it).
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := host.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}
func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }

// durationVar defines a duration flag, as pflag's DurationVar but with days.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// sinceValue is every --since flag: an RFC 3339 time, or a duration back
// from the moment the flag is read (host.ParseSince).
type sinceValue struct {
	t   *time.Time
	raw string
}

func (s *sinceValue) Set(v string) error {
	t, err := host.ParseSince(v, time.Now())
	if err != nil {
		return err
	}
	*s.t, s.raw = t, v
	return nil
}
func (s *sinceValue) String() string { return s.raw }
func (s *sinceValue) Type() string   { return "since" }

// sinceVar defines --since on fs, storing the bound in p (zero: none).
func sinceVar(fs *pflag.FlagSet, p *time.Time, usage string) {
	fs.Var(&sinceValue{t: p}, "since", usage+": an RFC 3339 time or a duration back from now (1h, 7d)")
}
