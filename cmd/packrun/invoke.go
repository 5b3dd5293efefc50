package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

type invokeFlags struct {
	input     string
	json      bool
	maxMemory string
	timeout   time.Duration
	maxOutput string
	hostCalls int
	hostMem   string
	runID     string
	nodeID    string
	tenant    string
	attempt   int
	resume    []string
	pack      bundleFlags
}

func (a *app) invokeCommand() *cobra.Command {
	var f invokeFlags
	cmd := &cobra.Command{
		Use:   "invoke <module.wasm | FILE.pack | PROJECT_DIR | NAME[@VERSION|@RANGE]> [typeId]",
		Short: "Invoke a node of a module or pack and print its output",
		Long: `Invoke one node of a WebAssembly node-pack module on a fresh instance. The target is a
raw .wasm module, a .pack file (verified against the trust policy first), or an
installed pack NAME, NAME@VERSION or NAME@RANGE (e.g. vendor.acme.hello@^1.2; the
newest matching version runs), or a pack project directory (one with a pack.json,
as packrun init makes): it runs unsigned from its sources with its manifest's
grants and limits, and says so. A module that the pack.json beside it lists runs
the same way when that manifest grants services (run bare, it would be granted
nothing). A pack's own limits apply unless flags override them.

typeId may be omitted when the module has one node. The node's output JSON is
printed on stdout; with --json one object describes the whole invocation:
{"attempt_id","outcome","output","error","interrupt","events","logs","duration_ms",...}.

A suspended node (openwop_interrupt) exits 3 and prints its interrupt payload;
invoke again with --resume VALUE (repeatable, one per interrupt) to resume it.`,
		Example: `  packrun invoke examples/hello-c/hello.wasm --input '{"name":"Ada"}'
  packrun invoke hello.wasm example.hello --input @input.json --json --max-memory 16MiB --timeout 200ms

Exit codes: 0 completed, 2 failed (traps, host_reentered...), 3 suspended, 4 a limit
breached (wasm-memory, wasm-execution-time, output-size, host-calls, host-memory),
5 refused (module_limit, unknown_import, an untrusted pack...), 64 usage, 66 not found
(file, pack, node), 78 a malformed config.json or adapters.json in the home, 1 anything else.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			node := ""
			if len(args) == 2 {
				node = args[1]
			}
			return a.invoke(cmd, args[0], node, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.input, "input", "{}", "node input: JSON text, @FILE, or @- for stdin")
	outputVar(fl, &f.json)
	fl.StringVar(&f.maxMemory, "max-memory", "", "linear memory limit, e.g. 16MiB (default 128MiB)")
	durationVar(fl, &f.timeout, "timeout", 0, "wall-clock limit, e.g. 200ms (default 30s)")
	fl.StringVar(&f.maxOutput, "max-output", "", "response size limit, e.g. 1MiB (default 16MiB)")
	fl.IntVar(&f.hostCalls, "max-host-calls", 0, "host-call limit per invocation (default 1000000)")
	fl.StringVar(&f.hostMem, "max-host-memory", "", "what the host may hold for one invocation beyond its linear memory (run state written, host-call trace), e.g. 16MiB (default 64MiB)")
	fl.StringVar(&f.runID, "run-id", "", "run id (seeds openwop_random with node id and attempt)")
	fl.StringVar(&f.nodeID, "node-id", "", "node id within the run (default: the typeId)")
	fl.StringVar(&f.tenant, "tenant", "default", "tenant id")
	fl.IntVar(&f.attempt, "attempt", 1, "attempt number, nodeContext.attempt (openwop counts from 0; given, 0 stays 0)")
	fl.StringArrayVar(&f.resume, "resume", nil, "JSON value returned by the next openwop_interrupt (repeatable)")
	f.pack.register(cmd)
	return cmd
}

func (a *app) limits(maxMemory string, timeout time.Duration, maxOutput string, hostCalls int, hostMem string) (runtime.Limits, error) {
	var l runtime.Limits
	var err error
	if hostMem != "" {
		if l.HostMemoryBytes, err = parseSize(hostMem); err != nil {
			return l, usageError("--max-host-memory: %v", err)
		}
	}
	if maxMemory != "" {
		if l.MemoryBytes, err = parseSize(maxMemory); err != nil {
			return l, usageError("--max-memory: %v", err)
		}
	}
	if maxOutput != "" {
		if l.OutputBytes, err = parseSize(maxOutput); err != nil {
			return l, usageError("--max-output: %v", err)
		}
	}
	if timeout < 0 {
		return l, usageError("--timeout must be positive")
	}
	if hostCalls < 0 {
		return l, usageError("--max-host-calls must be positive")
	}
	l.Timeout, l.HostCalls = timeout, hostCalls
	return l, nil
}

func (a *app) readInput(spec string) (json.RawMessage, error) { return a.readJSON("--input", spec) }

// readJSON reads the JSON value of flag: given inline, @FILE or @- (stdin).
func (a *app) readJSON(flag, spec string) (json.RawMessage, error) {
	var b []byte
	var err error
	switch {
	case spec == "@-":
		b, err = io.ReadAll(io.LimitReader(a.stdin, maxInputBytes+1))
	case strings.HasPrefix(spec, "@"):
		b, err = packrun.ReadFile(spec[1:], maxInputBytes)
	default:
		b = []byte(spec)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	if len(b) > maxInputBytes {
		return nil, usageError("%s: larger than %d bytes", flag, maxInputBytes)
	}
	if !json.Valid(b) {
		return nil, usageError("%s: not valid JSON", flag)
	}
	return b, nil
}

const maxInputBytes = 64 << 20

// invokeJSON is the --json shape of an invocation.
type invokeJSON struct {
	AttemptID   string             `json:"attempt_id,omitempty"`
	Outcome     string             `json:"outcome"`
	Node        string             `json:"node,omitempty"`
	Output      json.RawMessage    `json:"output"`
	Error       any                `json:"error"`
	Interrupt   json.RawMessage    `json:"interrupt"`
	Events      []runtime.Event    `json:"events"`
	Logs        []runtime.LogEntry `json:"logs"`
	Stdout      string             `json:"stdout"`
	Stderr      string             `json:"stderr"`
	Truncated   []string           `json:"truncated,omitempty"`
	HostCalls   int                `json:"host_calls"`
	MemoryBytes uint64             `json:"memory_bytes"`
	DurationMs  float64            `json:"duration_ms"`
}

// refusalJSON is the --json shape of a module refused at load.
type refusalJSON struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Items   []string `json:"items,omitempty"`
}

func (a *app) invoke(cmd *cobra.Command, target, node string, f invokeFlags) error {
	ctx := cmd.Context()
	limits, err := a.limits(f.maxMemory, f.timeout, f.maxOutput, f.hostCalls, f.hostMem)
	if err != nil {
		return err
	}
	input, err := a.readInput(f.input)
	if err != nil {
		return err
	}
	var resume []json.RawMessage
	for _, r := range f.resume {
		if !json.Valid([]byte(r)) {
			return usageError("--resume %q: not valid JSON", r)
		}
		resume = append(resume, json.RawMessage(r))
	}
	if f.attempt < 0 {
		return usageError("--attempt %d: must be 0 or more", f.attempt)
	}
	h, err := a.open(ctx, readWrite, packrun.Config{Workers: 1})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	inv, err := h.Invoke(ctx, target, packrun.InvokeRequest{
		Node: node, Input: input, Tenant: f.tenant, RunID: f.runID, NodeID: f.nodeID,
		Attempt: f.attempt, AttemptGiven: cmd.Flags().Changed("attempt"), Resume: resume, Limits: limits, Trust: f.pack.files(),
	})
	if err != nil {
		if errors.Is(err, runtime.ErrRefused) {
			return a.refused(err, f.json)
		}
		return err
	}
	att, res := inv.Attempt, inv.Result
	if inv.Local != "" {
		fmt.Fprintf(a.stderr, "packrun: ran %s from %s unsigned (local sources: not verified, not installed)\n", att.Pack, inv.Local)
	}
	a.log.Debug("invoked", "target", target, "node", res.Node, "attempt", att.AttemptID, "outcome", res.Outcome, "duration", res.Duration, "hostCalls", res.HostCalls)
	if f.json {
		return a.printInvokeJSON(res, att.AttemptID)
	}
	a.relayGuestOutput(res)
	switch res.Outcome {
	case abi.Completed:
		fmt.Fprintf(a.stdout, "%s\n", res.Output)
		return nil
	case abi.Suspended:
		fmt.Fprintf(a.stdout, "%s\n", res.Interrupt)
		return withCode(exitSuspended, fmt.Errorf("node %s suspended; resume with --resume '<json>'", res.Node))
	}
	if b := res.Breach(); b != nil {
		return withCode(exitBreached, fmt.Errorf("node %s: %s limit breached: limit %d, observed %d", res.Node, b.Kind, b.Limit, b.Observed))
	}
	return withCode(exitFailed, fmt.Errorf("node %s failed: %s", res.Node, res.Error))
}

func (a *app) relayGuestOutput(res *runtime.Result) {
	g := a.log.Named("guest").With("node", res.Node)
	for _, l := range res.Logs {
		switch l.Level {
		case "trace":
			g.Trace(l.Message)
		case "debug":
			g.Debug(l.Message)
		case "warn":
			g.Warn(l.Message)
		case "error":
			g.Error(l.Message)
		default:
			g.Info(l.Message)
		}
	}
	if len(res.Stdout) > 0 {
		g.Info("stdout", "text", string(res.Stdout))
	}
	if len(res.Stderr) > 0 {
		g.Info("stderr", "text", string(res.Stderr))
	}
}

func (a *app) printInvokeJSON(res *runtime.Result, attemptID string) error {
	out := invokeJSON{
		AttemptID: attemptID,
		Outcome:   string(res.Outcome), Node: res.Node, Output: res.Output, Interrupt: res.Interrupt,
		Events: res.Events, Logs: res.Logs, Stdout: string(res.Stdout), Stderr: string(res.Stderr),
		Truncated: res.Truncated, HostCalls: res.HostCalls, MemoryBytes: res.MemoryBytes,
		DurationMs: float64(res.Duration.Microseconds()) / 1000,
	}
	if res.Error != nil {
		out.Error = res.Error
	}
	if out.Events == nil {
		out.Events = []runtime.Event{}
	}
	if out.Logs == nil {
		out.Logs = []runtime.LogEntry{}
	}
	if err := a.emit(out); err != nil {
		return err
	}
	switch {
	case res.Outcome == abi.Completed:
		return nil
	case res.Outcome == abi.Suspended:
		return withCode(exitSuspended, nil)
	case res.Breach() != nil:
		return withCode(exitBreached, nil)
	}
	return withCode(exitFailed, nil)
}

// refused reports a load failure: exit 4 when initialisation hit a limit,
// 5 for any other refusal.
func (a *app) refused(err error, asJSON bool) error {
	le, ok := errors.AsType[*runtime.LoadError](err)
	if !ok {
		return err
	}
	code := exitRefused
	if le.Breach != nil {
		code = exitBreached
	}
	if asJSON {
		out := map[string]any{
			"outcome": "refused",
			"error":   refusalJSON{Code: le.Code, Message: le.Error(), Items: le.Items},
			"events":  []runtime.Event{},
		}
		if le.Breach != nil {
			out["events"] = []runtime.Event{*le.Breach}
		}
		if werr := a.emit(out); werr != nil {
			return werr
		}
	}
	return withCode(code, fmt.Errorf("refused: %w", err))
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
