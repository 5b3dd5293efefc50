package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

// devQuiet is how long dev waits after the last file event before it looks
// at what changed: editors save in several steps (write, rename, chmod).
const devQuiet = 100 * time.Millisecond

// devSkipDirs are project directories dev neither watches nor hashes: its
// own output, version control, and toolchains' dependency and build trees.
var devSkipDirs = map[string]bool{"dist": true, ".git": true, "node_modules": true, "target": true}

func (a *app) devCommand() *cobra.Command {
	var once bool
	var input string
	cmd := &cobra.Command{
		Use:   "dev [DIR] [--once] [--input JSON|@FILE]",
		Short: "Build, sign with the development key, install and run a local.* project on every save",
		Long: `Develop the pack project in DIR (default: the current directory; see packrun init):
build it (build.sh, as packrun build does), sign it with the home's development
key, install it over the previous build, run its node on DIR/sample.json (or
--input) and print the output and the replay verdict of that attempt. Then watch
the sources and do it again on every save, until Ctrl-C. A build that fails
prints one line and the compiler's output, and dev keeps watching.

The development key (HOME/dev/packrun-dev.key) is created on first use and
trusted in the home's trust policy for local.* only: dev refuses a pack named
outside local.*, and no trust policy may widen that key's namespaces. A dev
install may replace the same name@version; packrun install still may not.`,
		Example: `  packrun init c hello && cd hello && packrun dev
  packrun dev hello --once --input '{"name":"Ada"}'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			return a.dev(cmd.Context(), dir, input, once)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "build, sign, install and run once, then exit (the exit code says how it went)")
	cmd.Flags().StringVar(&input, "input", "", "node input: JSON text, @FILE, or @- (default @DIR/"+sampleInputName+", else {})")
	return cmd
}

// devSession is one packrun dev: the host, the key, the project.
type devSession struct {
	a      *app
	h      *packrun.Host
	dir    string
	key    crypto.Signer
	input  string // --input, or "" for sample.json
	prints io.Writer
}

func (a *app) dev(ctx context.Context, dir, input string, once bool) error {
	if err := checkProjectDir(dir); err != nil {
		return err
	}
	key, err := a.devKey()
	if err != nil {
		return err
	}
	h, err := a.open(ctx, readWrite, packrun.Config{Workers: 1})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	s := &devSession{a: a, h: h, dir: dir, key: key, input: input, prints: a.stdout}
	if once {
		return s.round(ctx)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("dev: watch %s: %w", dir, err)
	}
	defer w.Close()
	if err := watchTree(w, dir); err != nil {
		return fmt.Errorf("dev: watch %s: %w", dir, err)
	}
	s.report(s.round(ctx))
	last := snapshot(dir)
	fmt.Fprintf(a.stdout, "watching %s (Ctrl-C stops)\n", dir)
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(a.stdout, "stopped")
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("dev: the file watcher stopped")
			}
			if ev.Has(fsnotify.Create) {
				if fi, err := os.Stat(ev.Name); err == nil && fi.IsDir() && !devSkipDirs[fi.Name()] {
					_ = watchTree(w, ev.Name)
				}
			}
			quiet = time.After(devQuiet)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("dev: the file watcher stopped")
			}
			a.log.Warn("file watcher", "error", err)
		case <-quiet:
			quiet = nil
			// Only a change of content rebuilds: the build's own writes
			// (pack.json's digests, the module) are in the snapshot taken
			// after the last round.
			if now := snapshot(dir); !maps.Equal(now, last) {
				s.report(s.round(ctx))
				last = snapshot(dir)
			}
		}
	}
}

// report prints the one-line error of a round that did not complete; the
// watch goes on.
func (s *devSession) report(err error) {
	if err != nil && !errors.Is(err, context.Canceled) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintf(s.prints, "packrun dev: %s\n", oneLine(msg))
		}
	}
}

// round builds, signs, installs and runs the project once, printing what
// happened. The error says why the round stopped short (its exit code in
// --once mode).
func (s *devSession) round(ctx context.Context) error {
	a := s.a
	start := time.Now()
	var buildOut bytes.Buffer
	packPath, err := a.buildProject(ctx, s.dir, &buildOut)
	if err != nil {
		if _, ok := errors.AsType[*buildError](err); ok {
			fmt.Fprintf(s.prints, "build failed: %s exited non-zero; fix the source and save (compiler output below)\n", filepath.Join(s.dir, "build.sh"))
			_, _ = s.prints.Write(buildOut.Bytes()) // terminal text, as fmt.Fprint* (.golangci.yml)
			return withCode(exitOther, nil)
		}
		return err
	}
	built := time.Since(start)
	archive, err := readPackFile(packPath)
	if err != nil {
		return err
	}
	arch, err := packs.Read(bytes.NewReader(archive), packs.DefaultLimits())
	if err != nil {
		return err
	}
	m := arch.Manifest
	if !registry.MatchNamespace(registry.DevNamespace, m.Name) {
		return usageError("dev signs with the development key, trusted for %s only, and %s is not under it: rename the pack in pack.json, or sign and install it with your own key (packrun sign, packrun install)", registry.DevNamespace, m.Name)
	}
	host, _ := os.Hostname()
	bundle, prov, err := registry.Sign(ctx, archive, m.Name, s.key, registry.SignOptions{
		BuilderID: "local:packrun-dev@" + host, SourceDigest: arch.SourceDigest(), BuiltAt: time.Now(),
	})
	if err != nil {
		return err
	}
	// Beside the pack, where packrun install and invoke look for them.
	for path, data := range map[string][]byte{packPath + ".sigstore.json": bundle, packPath + ".provenance.sigstore.json": prov} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	p, already, err := s.h.Install(ctx, registry.Signed{Archive: archive, Bundle: bundle, Provenance: prov}, packrun.InstallOptions{ReplaceLocal: true})
	if err != nil {
		return err
	}
	state := "installed"
	if already {
		state = "unchanged"
	}
	fmt.Fprintf(s.prints, "%s: built in %s, signed with the development key, %s (sha256 %s)\n", p.Ref(), built.Round(time.Millisecond), state, p.SHA256[:12])

	input, err := s.readInput()
	if err != nil {
		return err
	}
	inv, err := s.h.Invoke(ctx, p.Ref(), packrun.InvokeRequest{Input: input})
	if err != nil {
		return err
	}
	res := inv.Result
	a.relayGuestOutput(res)
	var outcomeErr error
	switch {
	case res.Outcome == abi.Completed:
		fmt.Fprintf(s.prints, "output: %s\n", res.Output)
	case res.Outcome == abi.Suspended:
		fmt.Fprintf(s.prints, "suspended: %s\n", res.Interrupt)
		outcomeErr = withCode(exitSuspended, nil)
	case res.Breach() != nil:
		b := res.Breach()
		fmt.Fprintf(s.prints, "limit breached: %s (limit %d, observed %d)\n", b.Kind, b.Limit, b.Observed)
		outcomeErr = withCode(exitBreached, nil)
	default:
		fmt.Fprintf(s.prints, "failed: %s\n", res.Error)
		outcomeErr = withCode(exitFailed, nil)
	}
	v, err := s.h.Replay(ctx, inv.Attempt.AttemptID, packrun.ReplayOptions{})
	if err != nil {
		return fmt.Errorf("replay of attempt %s: %w", inv.Attempt.AttemptID, err)
	}
	fmt.Fprint(s.prints, "replay: ")
	printVerdict(s.prints, v)
	if outcomeErr == nil && !v.Identical {
		outcomeErr = withCode(exitDiverged, nil)
	}
	return outcomeErr
}

// readInput is --input, else DIR/sample.json, else {}.
func (s *devSession) readInput() ([]byte, error) {
	if s.input != "" {
		return s.a.readInput(s.input)
	}
	sample := filepath.Join(s.dir, sampleInputName)
	if _, err := os.Stat(sample); errors.Is(err, fs.ErrNotExist) {
		return []byte("{}"), nil
	}
	b, err := s.a.readJSON(sample, "@"+sample)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// devKey returns the home's development key, creating it on first use,
// and makes sure the home's trust policy trusts it for local.* (registry
// refuses any wider trust for the entry named registry.DevKeyName).
func (a *app) devKey() (crypto.Signer, error) {
	prefix := filepath.Join(a.home, "dev", registry.DevKeyName)
	if _, err := os.Stat(prefix + ".key"); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(prefix), 0o700); err != nil {
			return nil, fmt.Errorf("dev key: %w", err)
		}
		if err := registry.GenerateKey(prefix); err != nil {
			return nil, fmt.Errorf("dev key: %w", err)
		}
		fmt.Fprintf(a.stderr, "packrun dev: created the development key %s.key, trusted for %s only\n", prefix, registry.DevNamespace)
	}
	key, err := registry.LoadPrivateKey(prefix + ".key")
	if err != nil {
		return nil, fmt.Errorf("dev key: %w", err)
	}
	pub, err := packrun.ReadFile(prefix+".pub", 64<<10)
	if err != nil {
		return nil, fmt.Errorf("dev key: %w", err)
	}
	path := a.trustPath("")
	policy, err := registry.LoadPolicy(path)
	if err != nil {
		return nil, err
	}
	for _, k := range policy.Keys {
		if k.Name != registry.DevKeyName {
			continue
		}
		if strings.TrimSpace(k.PublicKey) != strings.TrimSpace(string(pub)) {
			return nil, fmt.Errorf("dev key: %s trusts another key as %s than %s.pub; remove it (packrun trust remove %s) and run packrun dev again", path, registry.DevKeyName, prefix, registry.DevKeyName)
		}
		return key, nil
	}
	if err := policy.AddKey(registry.DevKeyName, pub, []string{registry.DevNamespace}); err != nil {
		return nil, fmt.Errorf("dev key: %w", err)
	}
	if err := policy.Save(path); err != nil {
		return nil, err
	}
	return key, nil
}

// watchTree watches dir and its subdirectories, but not devSkipDirs.
func watchTree(w *fsnotify.Watcher, dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if p != dir && devSkipDirs[d.Name()] {
			return filepath.SkipDir
		}
		return w.Add(p)
	})
}

// snapshot is the sha256 of every file under dir (but not devSkipDirs):
// what decides whether a burst of file events changed anything.
func snapshot(dir string) map[string][32]byte {
	out := map[string][32]byte{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != dir && devSkipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			out[p] = sha256.Sum256(b)
		}
		return nil
	})
	return out
}
