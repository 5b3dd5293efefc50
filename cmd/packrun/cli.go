package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/packrun/packrun/internal/buildinfo"
)

// exitError carries the exit code a command wants; its message (if any) is
// printed as one line on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func usageError(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// app holds what every command shares.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	home           string
	store          string // --store: a postgres:// URL, or "" for the home's SQLite
	logLevel       string
	logFormat      string
	log            hclog.Logger
	out            *outputValue // the running command's --output (nil: none)
}

// run is the whole program: it never panics on bad input and returns the
// process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	code := exitCode(err)
	if err == nil {
		return code
	}
	if msg := err.Error(); msg != "" {
		msg = oneLine(msg)
		if code == exitRefused && !strings.HasPrefix(msg, "refused") {
			msg = "refused: " + msg
		}
		fmt.Fprintf(stderr, "packrun: %s\n", msg)
		if code == exitUsage {
			path := "packrun"
			if cmd != nil {
				path = cmd.CommandPath()
			}
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		}
	}
	return code
}

// isUsage recognises cobra's own argument and flag errors.
func isUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument", "accepts ", "requires at least", "requires exactly", "required flag"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "packrun",
		Short: "Run WebAssembly skills, sensors and node packs in a sandbox",
		Long: `packrun runs skills, sensors and node packs compiled to WebAssembly under wazero,
with memory and time limits and a versioned host ABI (openwop RFC 0008 + packrun:host/v1).

Exit codes: 0 completed, 1 anything else, 2 failed (including traps), 3 suspended,
4 limit breached, 5 refused (module, pack, signature, trust, trace, evidence bundle,
tampered evidence, a lost evidence anchor), 6 replay diverged, 64 usage error, 66 not found (file, pack, node,
task, attempt, key, home), 69 unavailable (a busy or forbidden listen address), 78 bad configuration
file in the home.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if f := cmd.Flags().Lookup("output"); f != nil {
				if o, ok := f.Value.(*outputValue); ok {
					a.out = o
				}
			}
			if cmd.Annotations[noHome] != "" {
				return a.setupLog()
			}
			return a.setup()
		},
	}
	// --version prints what `packrun version` does.
	root.Version = buildinfo.Read().Version
	root.SetVersionTemplate(versionText(buildinfo.Read()))
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitUsage, err) })
	root.PersistentFlags().StringVar(&a.home, "home", "", "data directory (default $PACKRUN_HOME or ~/.packrun)")
	root.PersistentFlags().StringVar(&a.store, "store", "", "the store: a postgres:// URL shared by several serve nodes (default $PACKRUN_STORE, else the home's own SQLite database)")
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "warn", "log level: trace, debug, info, warn, error, off")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", "log format: text or json (one JSON object a line)")
	root.AddCommand(a.invokeCommand(), a.inspectCommand(), a.versionCommand(),
		a.keysCommand(), a.packCommand(), a.signCommand(), a.verifyCommand(), a.trustCommand(),
		a.installCommand(), a.listCommand(), a.uninstallCommand(), a.exportCommand(),
		a.serveCommand(), a.tasksCommand(), a.attemptsCommand(), a.evidenceCommand(), a.memoryCommand(),
		a.replayCommand(), a.traceCommand(), a.demoCommand(), a.initCommand(), a.buildCommand(), a.devCommand(), a.tokensCommand(), a.eventsCommand(),
		a.schedulesCommand(), a.sensorsCommand(), a.taskTypesCommand(), a.agentsCommand(), a.profilesCommand(), a.skillsCommand(), a.workflowsCommand(),
		a.messagesCommand(), a.storeCommand(), a.sdkCommand(), a.homeCommand())
	root.AddCommand(a.witnessCommand())
	root.AddCommand(a.openapiCommand())
	root.AddCommand(a.ociCommands()...)
	return root
}

func (a *app) setup() error {
	if err := a.setupLog(); err != nil {
		return err
	}
	if a.home == "" {
		a.home = os.Getenv("PACKRUN_HOME")
	}
	if a.home == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			return fmt.Errorf("cannot find a home directory; set --home or PACKRUN_HOME: %w", err)
		}
		a.home = filepath.Join(dir, ".packrun")
	}
	return nil
}

// setupLog sets up logging only, for a command that needs no home.
func (a *app) setupLog() error {
	lvl := hclog.LevelFromString(a.logLevel)
	if lvl == hclog.NoLevel {
		return usageError("--log-level %q: want trace, debug, info, warn, error or off", a.logLevel)
	}
	if a.logFormat != "text" && a.logFormat != "json" {
		return usageError("--log-format %q: want text or json", a.logFormat)
	}
	a.log = hclog.New(&hclog.LoggerOptions{Name: "packrun", Level: lvl, Output: a.stderr, JSONFormat: a.logFormat == "json"})
	return nil
}

func (a *app) cacheDir() string { return filepath.Join(a.home, "cache") }

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the packrun version, its build and the ABI versions it serves",
		Long: `Print the packrun version and its build: VCS revision, commit time and whether the
working tree was modified (recorded only by a build with -buildvcs=true; "unknown"
otherwise), the Go and wazero versions, and the host ABI versions served. The same
fields are in the "build" object of GET /.well-known/packrun.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := buildinfo.Read()
			if asJSON {
				return a.emit(info)
			}
			fmt.Fprint(a.stdout, versionText(info))
			return nil
		},
	}
	outputVar(cmd.Flags(), &asJSON)
	return cmd
}

// versionText is what `packrun version` and `packrun --version` print.
func versionText(b buildinfo.Info) string {
	return fmt.Sprintf("packrun %s (host ABI %s)\n  revision  %s\n  time      %s\n  modified  %s\n  go        %s\n  wazero    %s\n",
		b.Version, strings.Join(b.ABIVersions, ", "), b.Revision, b.Time, b.Modified, b.Go, b.Wazero)
}
