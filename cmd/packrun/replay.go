package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
)

func (a *app) replayCommand() *cobra.Command {
	var asJSON, all bool
	var against, traceFile, pack, taskType string
	var since time.Time
	var f bundleFlags
	var seals sealFlags
	cmd := &cobra.Command{
		Use:   "replay ATTEMPT_ID | --trace FILE | --all",
		Short: "Re-execute recorded attempts from their trace and report identical or the first divergence",
		Long: `Re-execute a recorded attempt with its recorded input, serving every host call from
its trace: no adapter call, no memory write, no enqueue, no artifact, nothing added to the
evidence. The result is identical (exit 0) or diverged (exit 6) with the first divergence:
the host call index and the function or arguments expected vs made, or how the output differs.

  --pack NAME@VERSION|FILE.pack  replay against another version of the pack
  --trace FILE                   replay a trace exported with 'packrun trace export': it must be
                                 sealed by this host's key or one named with --host-key
  --all                          replay many attempts (filters: --pack NAME[@VERSION] selects
                                 recorded attempts, --task-type, --since; --against runs them on
                                 another version) and print a summary`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !all && traceFile == "" && len(args) == 0 {
				return usageError("replay needs an attempt id, --trace FILE or --all")
			}
			// A trace carries what it replays: on a fresh machine,
			// replay --trace creates the home it runs in.
			acc := readOnly
			if traceFile != "" {
				acc = readWrite
			}
			h, err := a.open(ctx, acc, packrun.Config{PoolSize: 2})
			if err != nil {
				return err
			}
			defer h.Close(context.Background())
			switch {
			case all:
				if len(args) > 0 || traceFile != "" {
					return usageError("replay --all takes no attempt id or --trace")
				}
				filter := packrun.ReplayFilter{Pack: pack, TaskType: taskType, Since: since}
				return a.replayAll(ctx, h, filter, packrun.ReplayOptions{Against: against, Trust: f.files()}, asJSON)
			case traceFile != "":
				if len(args) > 0 {
					return usageError("replay --trace takes no attempt id")
				}
				b, err := packrun.ReadFile(traceFile, packrun.MaxTraceBytes)
				if err != nil {
					return err
				}
				t, err := packrun.ParseTrace(b)
				if err == nil {
					err = h.CheckTraceSeal(t, seals.policy())
				}
				if err != nil {
					return fmt.Errorf("%s: %w", traceFile, err)
				}
				v, err := h.ReplayTrace(ctx, t, packrun.ReplayOptions{Against: pack, Trust: f.files()})
				if err != nil {
					return err
				}
				return a.printReplay(v, asJSON)
			default:
				v, err := h.Replay(ctx, args[0], packrun.ReplayOptions{Against: pack, Trust: f.files()})
				if err != nil {
					return err
				}
				return a.printReplay(v, asJSON)
			}
		},
	}
	fl := cmd.Flags()
	outputVar(fl, &asJSON)
	fl.BoolVar(&all, "all", false, "replay every matching recorded attempt")
	fl.StringVar(&pack, "pack", "", "replay against NAME@VERSION or FILE.pack (with --all: only attempts of this pack)")
	fl.StringVar(&against, "against", "", "with --all: replay on this NAME@VERSION or FILE.pack")
	fl.StringVar(&traceFile, "trace", "", "a trace file from 'packrun trace export'")
	fl.StringVar(&taskType, "task-type", "", "with --all: only attempts of tasks of this type")
	sinceVar(fl, &since, "with --all: only attempts started since")
	f.register(cmd)
	seals.register(cmd, "trace")
	return cmd
}

// sealFlags are the flags that say which sealed files a command accepts.
type sealFlags struct {
	hostKeys      []string
	allowUnsealed bool
}

func (s *sealFlags) register(cmd *cobra.Command, what string) {
	cmd.Flags().StringSliceVar(&s.hostKeys, "host-key", nil, "also trust a "+what+" sealed by this host key (hex, as 'packrun evidence verify' prints it; repeatable)")
	cmd.Flags().BoolVar(&s.allowUnsealed, "allow-unsealed", false, "accept a "+what+" without a seal (exported by a packrun from before seals): its digest alone does not show an edit")
}

func (s *sealFlags) policy() packrun.SealPolicy {
	return packrun.SealPolicy{HostKeys: s.hostKeys, AllowUnsealed: s.allowUnsealed}
}

func (a *app) printReplay(v *packrun.ReplayVerdict, asJSON bool) error {
	if asJSON {
		if err := a.emit(v); err != nil {
			return err
		}
	} else {
		printVerdict(a.stdout, v)
	}
	if !v.Identical {
		return withCode(exitDiverged, nil)
	}
	return nil
}

func printVerdict(w io.Writer, v *packrun.ReplayVerdict) {
	if v.Identical {
		fmt.Fprintf(w, "identical: attempt %s (%s, %.2f ms)\n", v.AttemptID, v.Got.Outcome, v.DurationMs)
		return
	}
	fmt.Fprintf(w, "diverged: attempt %s\n", v.AttemptID)
	if d := v.Divergence; d != nil {
		fmt.Fprintf(w, "  at host call %d: %s\n", d.Index, d.Reason)
		if d.Expected != nil {
			fmt.Fprintf(w, "  expected: %s(%s)\n", d.Expected.Fn, printable(d.Expected.Args))
		}
		if d.Got != nil {
			fmt.Fprintf(w, "  got:      %s(%s)\n", d.Got.Fn, printable(d.Got.Args))
		}
		return
	}
	fmt.Fprintf(w, "  %s\n", v.Difference)
}

func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 {
			return '.'
		}
		return r
	}, s)
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

// replayAll replays a set of attempts and prints a summary. It exits 6
// if any diverged, else 1 if any could not be replayed.
func (a *app) replayAll(ctx context.Context, h *packrun.Host, filter packrun.ReplayFilter, opts packrun.ReplayOptions, asJSON bool) error {
	// Every replay instantiates its module afresh, so a replay of many
	// attempts allocates steadily while it keeps little: collecting at
	// twice Go's default heap growth (unless GOGC says otherwise) spends
	// ≈ 13 % less CPU on it, for ≈ 20 MB more at peak (BENCHMARKS.md).
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(200))
	}
	bar := newProgress(a.stderr, !asJSON && isTerminal(a.stderr))
	sum, err := h.ReplayAll(ctx, filter, opts, bar.set)
	if err != nil {
		return err
	}
	bar.done()
	if asJSON {
		if err := a.emit(sum); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintf(w, "identical\tdiverged\tcould not run\ttotal\ttime\n%d\t%d\t%d\t%d\t%s\n", sum.Identical, sum.Diverged, sum.CouldNotRun, sum.Total,
			(time.Duration(sum.DurationMs*1000) * time.Microsecond).Round(time.Millisecond))
		_ = w.Flush() // terminal text, as fmt.Fprint* (.golangci.yml)
		for _, v := range sum.Divergences {
			printVerdict(a.stdout, v)
		}
		if n := sum.Diverged - len(sum.Divergences); n > 0 {
			fmt.Fprintf(a.stdout, "... and %d more diverged\n", n)
		}
		for _, e := range sum.Errors {
			fmt.Fprintf(a.stdout, "could not run %s\n", e)
		}
		if n := sum.CouldNotRun - len(sum.Errors); n > 0 {
			fmt.Fprintf(a.stdout, "... and %d more could not run\n", n)
		}
	}
	switch {
	case sum.Tampered > 0:
		return withCode(exitRefused, fmt.Errorf("%d of %d attempts were changed after they were recorded and were not replayed; run 'packrun evidence verify'", sum.Tampered, sum.Total))
	case sum.Diverged > 0:
		return withCode(exitDiverged, nil)
	case sum.CouldNotRun > 0:
		return withCode(exitOther, fmt.Errorf("%d of %d attempts could not be replayed (none diverged)", sum.CouldNotRun, sum.Total))
	}
	return nil
}

// progress draws a one-line bar on a terminal; elsewhere it draws
// nothing.
type progress struct {
	w       io.Writer
	on      bool
	total   int
	last    time.Time
	started time.Time
}

func newProgress(w io.Writer, on bool) *progress {
	return &progress{w: w, on: on, started: time.Now()}
}

func (p *progress) set(n, total int) {
	p.total = total
	if !p.on || total == 0 || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width * n / total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), n, total)
}

func (p *progress) done() {
	if p.on && p.total > 0 {
		fmt.Fprintf(p.w, "\r[%s] %d/%d in %s\n", strings.Repeat("=", 30), p.total, p.total, time.Since(p.started).Round(time.Millisecond))
	}
}

// isTerminal says whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (a *app) traceCommand() *cobra.Command {
	tr := &cobra.Command{Use: "trace", Short: "Export portable traces of recorded attempts"}
	var out string
	export := &cobra.Command{
		Use:   "export ATTEMPT_ID -o FILE",
		Short: "Write a self-contained, versioned trace file (module digest, input, host calls, expected output), sealed with the host key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("trace export needs -o FILE")
			}
			return a.withHost(cmd, readOnly, func(h *packrun.Host) error {
				data, err := h.ExportTrace(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if err := os.WriteFile(out, data, 0o644); err != nil {
					return err
				}
				fmt.Fprintln(a.stdout, out)
				return nil
			})
		},
	}
	export.Flags().StringVarP(&out, "out", "o", "", "output file")
	tr.AddCommand(export)
	return tr
}
