package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/hosttest"

	"github.com/packrun/packrun/registry"
)

// devEdits are, per language, the source file, an edit that changes the
// output (the count goes up by 10, not 1) and a syntax error.
var devEdits = map[string]struct{ source, from, to, broken string }{
	"c":   {"node.c", "    count++;", "    count += 10;", "this is not C\n"},
	"wat": {"node.wat", "(i32.add (local.get $count) (i32.const 1))", "(i32.add (local.get $count) (i32.const 10))", "(this is not wat\n"},
}

// devOutputs are the outputs of the first run, the second (after an
// unchanged rebuild) and the first after the edit.
var devOutputs = map[string][3]string{
	"c":   {`output: {"name":"world","count":1}`, `output: {"name":"world","count":2}`, `output: {"name":"world","count":12}`},
	"wat": {`output: {"count":1}`, `output: {"count":2}`, `output: {"count":12}`},
}

func edit(t *testing.T, path, from, to string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(from)) {
		t.Fatalf("%s has no %q", path, from)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(from), []byte(to), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The done-when flow: packrun init LANG NAME, then packrun dev --once in
// it shows the output and the replay verdict; the dev key is trusted for
// local.* only; a normal install of a changed build under the same version
// is refused with the fix named, a pack rebuilt after signing says to sign
// it again.
func TestDevOnce(t *testing.T) {
	for _, lang := range []string{"c", "wat"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			needToolchain(t, lang)
			dir := t.TempDir()
			h := homeCLI{t, filepath.Join(dir, "home")}
			proj := filepath.Join(dir, "hello")
			h.ok("init", lang, proj)
			outs := devOutputs[lang]
			for i := range 2 {
				out := h.ok("dev", proj, "--once")
				if !strings.Contains(out, "local.hello@0.1.0: built in") || !strings.Contains(out, outs[i]+"\n") || !strings.Contains(out, "replay: identical") {
					t.Fatalf("dev --once #%d:\n%s", i+1, out)
				}
			}
			// The dev key is in the trust policy for local.* only.
			pol, err := registry.LoadPolicy(filepath.Join(h.home, "trust.json"))
			if err != nil {
				t.Fatal(err)
			}
			if e := pol.List(); len(e) != 1 || e[0].Name != registry.DevKeyName || strings.Join(e[0].Namespaces, ",") != "local.*" {
				t.Fatalf("trust policy: %+v", e)
			}

			// A normal install of another build of 0.1.0 is refused, naming
			// the fix; dev replaces it.
			e := devEdits[lang]
			edit(t, filepath.Join(proj, e.source), e.from, e.to)
			pack := filepath.Join(proj, "dist", "local.hello-0.1.0.pack")
			h.ok("build", proj)
			// Rebuilt after signing: the old bundle is stale.
			code, _, errs := h.run("install", pack)
			if code != exitRefused || !strings.Contains(errs, "the pack changed since it was signed: run `packrun sign "+pack) || strings.Contains(errs, "ASN.1") {
				t.Fatalf("stale signature: exit %d %s", code, errs)
			}
			h.ok("sign", pack, "--key", filepath.Join(h.home, "dev", registry.DevKeyName+".key"))
			code, _, errs = h.run("install", pack)
			if code == 0 || !strings.Contains(errs, "a different pack is installed under this name and version") || !strings.Contains(errs, "bump the version") || !strings.Contains(errs, "packrun dev") {
				t.Fatalf("reinstall: exit %d %s", code, errs)
			}
			out := h.ok("dev", proj, "--once")
			if !strings.Contains(out, "installed") || !strings.Contains(out, outs[2]+"\n") || !strings.Contains(out, "replay: identical") {
				t.Fatalf("dev after the edit:\n%s", out)
			}

			// A pack named outside local.* is refused: the dev key may not sign it.
			other := filepath.Join(dir, "other")
			h.ok("init", lang, other, "--name", "vendor.acme.other")
			code, out, errs = h.run("dev", other, "--once")
			if code != exitUsage || !strings.Contains(errs, "vendor.acme.other is not under it") {
				t.Fatalf("dev of vendor.acme.other: exit %d %s%s", code, out, errs)
			}
		})
	}
}

// devWaitFor waits until out holds want after offset from, and returns the
// offset past it.
func devWaitFor(t *testing.T, out *hosttest.SyncBuffer, from int, want string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a bound on a hung test, not a measurement
	for time.Now().Before(deadline) {
		s := out.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q in dev's output after offset %d:\n%s", want, from, out.String())
	return 0
}

// packrun dev watching: a saved edit rebuilds and shows the new output; a
// syntax error prints the one-line failure and the compiler's output and
// the watch goes on; the next good save recovers; cancelling (Ctrl-C)
// stops it with exit 0.
func TestDevWatch(t *testing.T) {
	for _, lang := range []string{"c", "wat"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			needToolchain(t, lang)
			dir := t.TempDir()
			home := filepath.Join(dir, "home")
			proj := filepath.Join(dir, "hello")
			homeCLI{t, home}.ok("init", lang, proj)
			e, outs := devEdits[lang], devOutputs[lang]
			src := filepath.Join(proj, e.source)
			good, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb hosttest.SyncBuffer
			code := make(chan int, 1)
			go func() {
				code <- run(ctx, []string{"--home", home, "dev", proj}, strings.NewReader(""), &out, &errb)
			}()
			at := devWaitFor(t, &out, 0, outs[0])
			at = devWaitFor(t, &out, at, "replay: identical")
			at = devWaitFor(t, &out, at, "watching")

			edit(t, src, e.from, e.to)
			at = devWaitFor(t, &out, at, `output: {`)
			at = devWaitFor(t, &out, at, "replay: identical")
			if !strings.Contains(out.String(), strings.Replace(outs[2], "12", "11", 1)) {
				t.Fatalf("after the edit, want the count to go up by 10:\n%s", out.String())
			}

			if err := os.WriteFile(src, append(append([]byte{}, good...), e.broken...), 0o644); err != nil {
				t.Fatal(err)
			}
			at = devWaitFor(t, &out, at, "build failed: "+filepath.Join(proj, "build.sh")+" exited non-zero")
			at = devWaitFor(t, &out, at, "error") // the compiler's output follows

			if err := os.WriteFile(src, good, 0o644); err != nil {
				t.Fatal(err)
			}
			at = devWaitFor(t, &out, at, "output: {")
			devWaitFor(t, &out, at, "replay: identical")
			if strings.Contains(out.String(), "packrun dev:") {
				t.Fatalf("unexpected error line:\n%s%s", out.String(), errb.String())
			}
			cancel()
			select {
			case c := <-code:
				if c != 0 || !strings.HasSuffix(out.String(), "stopped\n") {
					t.Fatalf("exit %d after cancel:\n%s", c, out.String())
				}
			case <-time.After(time.Minute):
				t.Fatal("dev did not stop after cancel")
			}
		})
	}
}
