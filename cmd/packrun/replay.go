package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/internal/sqlite"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

const exitDiverged = 6

// modulesDir keeps the bytes of bare modules invoked from the CLI, by
// digest, so their attempts can be replayed.
func (a *app) modulesDir() string { return filepath.Join(a.home, "modules", "sha256") }

func (a *app) rememberModule(wasm []byte, sha string) {
	dir := a.modulesDir()
	path := filepath.Join(dir, sha)
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(wasm)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), path) != nil {
		os.Remove(tmp.Name())
	}
}

// replayer loads the modules replays need, once each.
type replayer struct {
	a       *app
	env     *hostEnv
	against string // NAME@VERSION or FILE.pack to replay against, "" for the recorded module
	flags   bundleFlags
	mods    map[string]*runtime.Module
}

func limitsOf(raw json.RawMessage) runtime.Limits {
	var li runtime.LimitsInfo
	if json.Unmarshal(raw, &li) != nil {
		return runtime.Limits{}
	}
	return runtime.Limits{MemoryBytes: li.MemoryBytes, Timeout: time.Duration(li.TimeoutMs) * time.Millisecond, OutputBytes: li.OutputBytes, HostCalls: li.HostCalls, CaptureBytes: li.CaptureBytes, HostMemoryBytes: li.HostMemoryBytes}
}

func (r *replayer) module(ctx context.Context, t *replay.Trace) (*runtime.Module, error) {
	key := r.against + "|" + t.ModuleSHA256 + "|" + t.Node
	if m, ok := r.mods[key]; ok {
		return m, nil
	}
	var wasm []byte
	name := t.ModuleSHA256[:12]
	var opts runtime.LoadOptions
	switch {
	case r.against != "":
		var arch *packs.Archive
		var err error
		if strings.HasSuffix(r.against, ".pack") {
			_, arch, err = r.a.verified(ctx, r.against, r.flags)
		} else {
			arch, err = (&storePacks{st: r.env.store}).Open(ctx, r.against)
		}
		if err != nil {
			return nil, err
		}
		mod, ok := arch.Manifest.NodeModule(t.Node)
		if !ok {
			return nil, fmt.Errorf("%s@%s has no node %q", arch.Manifest.Name, arch.Manifest.Version, t.Node)
		}
		wasm, _ = arch.File(mod.Path)
		name = arch.Manifest.Name + "@" + arch.Manifest.Version
		opts.PackName, opts.Exports = arch.Manifest.Name, arch.Manifest.Exports(mod.Path)
	case t.Pack != "":
		arch, err := (&storePacks{st: r.env.store}).Open(ctx, t.Pack)
		if err != nil {
			return nil, fmt.Errorf("recorded pack %s: %w", t.Pack, err)
		}
		for _, mod := range arch.Manifest.Runtime.Modules {
			if mod.SHA256 == t.ModuleSHA256 {
				wasm, _ = arch.File(mod.Path)
				opts.PackName, opts.Exports = arch.Manifest.Name, arch.Manifest.Exports(mod.Path)
			}
		}
		if wasm == nil {
			return nil, fmt.Errorf("installed %s has no module with sha256 %s", t.Pack, t.ModuleSHA256)
		}
		name = t.Pack
	default:
		b, err := os.ReadFile(filepath.Join(r.a.modulesDir(), t.ModuleSHA256))
		if err != nil {
			return nil, fmt.Errorf("module %s is not available here (pass --pack NAME@VERSION or FILE.pack)", t.ModuleSHA256)
		}
		wasm = b
	}
	opts.Name, opts.Limits = name, limitsOf(t.Limits)
	m, err := r.env.rt.Load(ctx, wasm, opts)
	if err != nil {
		return nil, err
	}
	r.mods[key] = m
	return m, nil
}

func (a *app) replayCommand() *cobra.Command {
	var asJSON, all bool
	var against, traceFile, pack, taskType string
	var since time.Duration
	var f bundleFlags
	cmd := &cobra.Command{
		Use:   "replay ATTEMPT_ID | --trace FILE | --all",
		Short: "Re-execute recorded attempts from their trace and report identical or the first divergence",
		Long: `Re-execute a recorded attempt with its recorded input, serving every host call from
its trace: no adapter call, no memory write, no enqueue, no artifact, nothing added to the
evidence. The result is identical (exit 0) or diverged (exit 6) with the first divergence:
the host call index and the function or arguments expected vs made, or how the output differs.

  --pack NAME@VERSION|FILE.pack  replay against another version of the pack
  --trace FILE                   replay a trace exported with 'packrun trace export'
  --all                          replay many attempts (filters: --pack NAME[@VERSION] selects
                                 recorded attempts, --task-type, --since; --against runs them on
                                 another version) and print a summary`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if !all && traceFile == "" && len(args) == 0 {
				return usageError("replay needs an attempt id, --trace FILE or --all")
			}
			env, err := a.openHost(ctx, 2, 1)
			if err != nil {
				return err
			}
			defer env.Close(ctx)
			r := &replayer{a: a, env: env, flags: f, mods: map[string]*runtime.Module{}}
			switch {
			case all:
				if len(args) > 0 || traceFile != "" {
					return usageError("replay --all takes no attempt id or --trace")
				}
				r.against = against
				return a.replayAll(ctx, r, pack, taskType, since, asJSON)
			case traceFile != "":
				if len(args) > 0 {
					return usageError("replay --trace takes no attempt id")
				}
				b, err := readFileLimited(traceFile, replay.MaxTraceBytes)
				if err != nil {
					return withCode(exitUsage, err)
				}
				t, err := replay.Parse(b)
				if err != nil {
					return withCode(exitRefused, fmt.Errorf("%s: %w", traceFile, err))
				}
				r.against = pack
				return a.replayOne(ctx, r, t, asJSON)
			case len(args) == 1:
				att, err := env.backend.Attempt(ctx, args[0])
				if err != nil {
					return hostError(err)
				}
				t, err := replay.FromAttempt(att)
				if err != nil {
					return err
				}
				r.against = pack
				return a.replayOne(ctx, r, t, asJSON)
			}
			return usageError("replay needs an attempt id, --trace FILE or --all")
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	fl.BoolVar(&all, "all", false, "replay every matching recorded attempt")
	fl.StringVar(&pack, "pack", "", "replay against NAME@VERSION or FILE.pack (with --all: only attempts of this pack)")
	fl.StringVar(&against, "against", "", "with --all: replay on this NAME@VERSION or FILE.pack")
	fl.StringVar(&traceFile, "trace", "", "a trace file from 'packrun trace export'")
	fl.StringVar(&taskType, "task-type", "", "with --all: only attempts of tasks of this type")
	fl.DurationVar(&since, "since", 0, "with --all: only attempts started within this duration")
	f.register(cmd)
	return cmd
}

func (a *app) replayOne(ctx context.Context, r *replayer, t *replay.Trace, asJSON bool) error {
	m, err := r.module(ctx, t)
	if err != nil {
		return refusal(err)
	}
	v, err := replay.Run(ctx, m, t)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(a.stdout, v); err != nil {
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

func printVerdict(w io.Writer, v *replay.Verdict) {
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

type replaySummary struct {
	Identical   int               `json:"identical"`
	Diverged    int               `json:"diverged"`
	CouldNotRun int               `json:"could_not_run"`
	Divergences []*replay.Verdict `json:"divergences,omitempty"`
	Errors      []string          `json:"errors,omitempty"`
	DurationMs  float64           `json:"duration_ms"`
}

func (a *app) replayAll(ctx context.Context, r *replayer, pack, taskType string, since time.Duration, asJSON bool) error {
	filter := host.AttemptFilter{Pack: pack, Limit: 1_000_000}
	if since > 0 {
		filter.Since = time.Now().Add(-since)
	}
	atts, err := r.env.backend.ListAttempts(ctx, filter)
	if err != nil {
		return err
	}
	if taskType != "" {
		tasks, err := r.env.backend.ListTasks(ctx, host.TaskFilter{TaskType: taskType, Limit: 1_000_000})
		if err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, t := range tasks {
			keep[t.TaskID] = true
		}
		kept := atts[:0]
		for _, at := range atts {
			if keep[at.TaskID] {
				kept = append(kept, at)
			}
		}
		atts = kept
	}
	start := time.Now()
	var sum replaySummary
	bar := newProgress(a.stderr, len(atts), !asJSON)
	for i, at := range atts {
		bar.set(i)
		t, err := replay.FromAttempt(at)
		var v *replay.Verdict
		if err == nil {
			var m *runtime.Module
			if m, err = r.module(ctx, t); err == nil {
				v, err = replay.Run(ctx, m, t)
			}
		}
		switch {
		case err != nil:
			sum.CouldNotRun++
			if len(sum.Errors) < 5 {
				sum.Errors = append(sum.Errors, fmt.Sprintf("%s: %v", at.AttemptID, oneLine(err.Error())))
			}
		case v.Identical:
			sum.Identical++
		default:
			sum.Diverged++
			if len(sum.Divergences) < 5 {
				sum.Divergences = append(sum.Divergences, v)
			}
		}
	}
	bar.done(len(atts))
	sum.DurationMs = float64(time.Since(start).Microseconds()) / 1000
	if asJSON {
		if err := writeJSON(a.stdout, sum); err != nil {
			return err
		}
	} else {
		w := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintf(w, "identical\tdiverged\tcould not run\ttotal\ttime\n%d\t%d\t%d\t%d\t%s\n", sum.Identical, sum.Diverged, sum.CouldNotRun, len(atts), time.Since(start).Round(time.Millisecond))
		w.Flush()
		for _, v := range sum.Divergences {
			printVerdict(a.stdout, v)
		}
		for _, e := range sum.Errors {
			fmt.Fprintf(a.stdout, "could not run %s\n", e)
		}
	}
	if sum.Diverged > 0 || sum.CouldNotRun > 0 {
		return withCode(exitDiverged, nil)
	}
	return nil
}

// progress draws a one-line bar on a terminal-ish writer.
type progress struct {
	w       io.Writer
	total   int
	on      bool
	last    time.Time
	started time.Time
}

func newProgress(w io.Writer, total int, on bool) *progress {
	return &progress{w: w, total: total, on: on && total > 0, started: time.Now()}
}

func (p *progress) set(n int) {
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 30
	filled := width * n / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("=", filled), strings.Repeat(" ", width-filled), n, p.total)
}

func (p *progress) done(n int) {
	if p.on {
		fmt.Fprintf(p.w, "\r[%s] %d/%d in %s\n", strings.Repeat("=", 30), n, p.total, time.Since(p.started).Round(time.Millisecond))
	}
}

func (a *app) traceCommand() *cobra.Command {
	tr := &cobra.Command{Use: "trace", Short: "Export portable traces of recorded attempts"}
	var out string
	export := &cobra.Command{
		Use:   "export ATTEMPT_ID -o FILE",
		Short: "Write a self-contained, versioned trace file (module digest, input, host calls, expected output)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("trace export needs -o FILE")
			}
			return a.withBackend(cmd, func(b *sqlite.Store) error {
				att, err := b.Attempt(cmd.Context(), args[0])
				if err != nil {
					return hostError(err)
				}
				t, err := replay.FromAttempt(att)
				if err != nil {
					return err
				}
				data, err := t.Marshal()
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
