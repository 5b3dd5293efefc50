package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun"
)

// probeHome installs the probe module as local.probe (with memory, adapters
// and config granted) and an "echo" script adapter that leaves a marker file
// each time it runs.
func probeHome(t *testing.T) (h homeCLI, marker string) {
	t.Helper()
	return probeHomeWith(t, "probe.wasm", "1.0.0", nil)
}

func probeHomeWith(t *testing.T, module, version string, h0 *homeCLI) (h homeCLI, marker string) {
	t.Helper()
	dir := t.TempDir()
	h = homeCLI{t, filepath.Join(dir, "home")}
	if h0 != nil {
		h = *h0
	}
	wasm, err := os.ReadFile("../../testdata/modules/" + module)
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	sum := sha256.Sum256(wasm)
	os.WriteFile(filepath.Join(src, "probe.wasm"), wasm, 0o644)
	os.WriteFile(filepath.Join(src, "pack.json"), []byte(fmt.Sprintf(`{"name":"local.probe","version":%q,
		"runtime":{"language":"wasm","abi":{"version":1,"minor":0},"modules":[{"path":"probe.wasm","sha256":%q}]},
		"nodes":[{"typeId":"probe.host","kind":"node"},{"typeId":"probe.random","kind":"node"},{"typeId":"probe.now","kind":"node"},
		         {"typeId":"probe.state","kind":"node"},{"typeId":"probe.log","kind":"node"},{"typeId":"probe.interrupt2","kind":"node"}],
		"grants":{"services":["memory","adapters","config"],"adapters":["echo"],"memoryNamespaces":["ns"]}}`, version, hex.EncodeToString(sum[:]))), 0o644)
	marker = filepath.Join(dir, "adapter-ran")
	script := filepath.Join(dir, "echo.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\ncat\n"), 0o755)
	os.MkdirAll(h.home, 0o755)
	os.WriteFile(filepath.Join(h.home, "adapters.json"), []byte(fmt.Sprintf(`{"adapters":[{"adapter_id":"echo","kind":"script","command":%q,"timeout_ms":5000,"env":{"PATH":"/usr/bin:/bin"}}]}`, script)), 0o644)
	key := filepath.Join(dir, "k")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", src, "-o", filepath.Join(dir, "probe.pack"))
	h.ok("sign", filepath.Join(dir, "probe.pack"), "--key", key+".key")
	h.ok("trust", "add-key", "k"+version, key+".pub", "--namespace", "local.*")
	h.ok("install", filepath.Join(dir, "probe.pack"))
	return h, marker
}

func attemptID(t *testing.T, h homeCLI, args ...string) string {
	t.Helper()
	code, out, errs := h.run(append(args, "--json")...)
	if code != 0 && code != 3 {
		t.Fatalf("%v: exit %d %s", args, code, errs)
	}
	var v struct {
		AttemptID string `json:"attempt_id"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.AttemptID == "" {
		t.Fatalf("%v: %v %s", args, err, out)
	}
	return v.AttemptID
}

func TestReplayRecordedAttempts(t *testing.T) {
	h, marker := probeHome(t)
	ids := []string{
		attemptID(t, h, "invoke", "local.probe", "probe.host"),
		attemptID(t, h, "invoke", "local.probe", "probe.random", "--run-id", "r1"),
		attemptID(t, h, "invoke", "local.probe", "probe.random", "--run-id", "r1", "--attempt", "0"),
		attemptID(t, h, "invoke", "local.probe", "probe.now"),
		attemptID(t, h, "invoke", "local.probe", "probe.state"),
		attemptID(t, h, "invoke", "local.probe", "probe.interrupt2"),
		attemptID(t, h, "invoke", "local.probe", "probe.interrupt2", "--resume", `"a"`, "--resume", `{"b":2}`),
		attemptID(t, h, "invoke", "../../examples/hello-go/hello.wasm", "--input", `{"name":"go"}`),
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the adapter did not run while recording")
	}
	os.Remove(marker)
	for _, id := range ids {
		if out := h.ok("replay", id); !strings.HasPrefix(out, "identical") {
			t.Fatalf("replay %s: %s", id, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("replay reached the adapter")
	}
	var sum struct{ Identical, Diverged, CouldNotRun int }
	code, out, _ := h.run("replay", "--all", "--json")
	if json.Unmarshal([]byte(out), &sum); code != 0 || sum.Identical != len(ids) || sum.Diverged != 0 || sum.CouldNotRun != 0 {
		t.Fatalf("replay --all: exit %d %s", code, out)
	}
	// Nothing was added to the evidence by replaying.
	var atts []any
	json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &atts)
	if len(atts) != len(ids) {
		t.Fatalf("%d attempts after replays, want %d", len(atts), len(ids))
	}
}

// TestInvokeAttemptZero: openwop counts nodeContext.attempt from 0, so an
// explicit --attempt 0 stays 0 and draws a random stream of its own
// (RFC 0008 §G seeds per (runId, nodeId, attempt)); no flag still means 1.
func TestInvokeAttemptZero(t *testing.T) {
	h, _ := probeHome(t)
	draw := func(args ...string) string {
		var v struct{ Output json.RawMessage }
		out := h.ok(append([]string{"invoke", "local.probe", "probe.random", "--run-id", "r0", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Output) == 0 {
			t.Fatalf("%v: %v %s", args, err, out)
		}
		return string(v.Output)
	}
	zero, one, unset := draw("--attempt", "0"), draw("--attempt", "1"), draw()
	if zero == one {
		t.Fatalf("attempts 0 and 1 drew the same bytes: %s", zero)
	}
	if unset != one {
		t.Fatalf("no --attempt drew %s, --attempt 1 drew %s", unset, one)
	}
}

func TestReplayDivergesAgainstAnotherVersion(t *testing.T) {
	h, _ := probeHome(t)
	id := attemptID(t, h, "invoke", "local.probe", "probe.state")
	dir := t.TempDir()
	code, out, _ := h.run("replay", id, "--pack", "local.probe@1.0.0")
	if code != 0 {
		t.Fatalf("same version: exit %d %s", code, out)
	}
	// Version 2 makes its host calls in another order.
	probeHomeWith(t, "probe-v2.wasm", "2.0.0", &h)
	code, out, _ = h.run("replay", id, "--pack", "local.probe@2.0.0")
	if code != 6 || !strings.Contains(out, "diverged") || !strings.Contains(out, "at host call 0") ||
		!strings.Contains(out, "expected: openwop.openwop_variable_get") || !strings.Contains(out, "got:      openwop.openwop_channel_write") {
		t.Fatalf("other version: exit %d %s", code, out)
	}
	code, out, _ = h.run("replay", "--all", "--against", "local.probe@2.0.0", "--json")
	if code != 6 || !strings.Contains(out, `"diverged":1`) {
		t.Fatalf("replay --all --against: exit %d %s", code, out)
	}
	// Edit the recorded trace: replay the exported file with one value changed.
	tf := filepath.Join(dir, "t.json")
	h.ok("trace", "export", id, "-o", tf)
	if out := h.ok("replay", "--trace", tf); !strings.HasPrefix(out, "identical") {
		t.Fatalf("trace file replay: %s", out)
	}
	b, _ := os.ReadFile(tf)
	os.WriteFile(tf, []byte(strings.Replace(string(b), `"probe.state"`, `"probe.log"`, 1)), 0o644)
	if code, _, errs := h.run("replay", "--trace", tf); code != 5 || !strings.Contains(errs, "digest mismatch") {
		t.Fatalf("tampered trace: exit %d %s", code, errs)
	}
	os.WriteFile(tf, []byte(`{"format":"packrun-trace/v1"`), 0o644)
	if code, _, errs := h.run("replay", "--trace", tf); code != 5 || !strings.Contains(errs, "invalid trace") {
		t.Fatalf("malformed trace: exit %d %s", code, errs)
	}
}

// TestReplayAfterInterleavedInvocations: 100 invocations running
// concurrently each replay identically (fresh state per invocation).
func TestReplayAfterInterleavedInvocations(t *testing.T) {
	h, _ := probeHome(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				node := []string{"probe.random", "probe.now", "probe.state", "probe.host"}[(g+i)%4]
				id := attemptID(t, h, "invoke", "local.probe", node, "--run-id", fmt.Sprintf("g%d-%d", g, i))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}(g)
	}
	wg.Wait()
	var sum struct{ Identical, Diverged, CouldNotRun int }
	code, out, _ := h.run("replay", "--all", "--json")
	if json.Unmarshal([]byte(out), &sum); code != 0 || sum.Identical != 100 {
		t.Fatalf("replay --all of 100 interleaved: exit %d %s", code, out)
	}
}

// A trace edited and given a matching digest again (a forged tenant,
// attempt id, module digest, limits or output) no longer carries a valid
// seal: replay refuses it with exit 5. So does a trace with no seal, or one
// sealed by a host this one does not trust.
func TestResealedTraceIsRefused(t *testing.T) {
	h, _ := probeHome(t)
	id := attemptID(t, h, "invoke", "local.probe", "probe.state")
	dir := t.TempDir()
	tf := filepath.Join(dir, "t.json")
	h.ok("trace", "export", id, "-o", tf)
	raw, _ := os.ReadFile(tf)
	reseal := func(edit func(*packrun.Trace)) string {
		tr, err := packrun.ParseTrace(raw)
		if err != nil {
			t.Fatal(err)
		}
		edit(tr)
		b, err := tr.Marshal(nil) // a new digest, the old seal
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "forged.json")
		os.WriteFile(p, b, 0o644)
		return p
	}
	for name, edit := range map[string]func(*packrun.Trace){
		"tenant":        func(tr *packrun.Trace) { tr.Tenant = "mallory" },
		"attempt id":    func(tr *packrun.Trace) { tr.AttemptID = "att_forged" },
		"module digest": func(tr *packrun.Trace) { tr.ModuleSHA256 = strings.Repeat("0", 64) },
		"limits":        func(tr *packrun.Trace) { tr.Limits = json.RawMessage(`{"timeoutMs":1}`) },
		"output":        func(tr *packrun.Trace) { tr.Expected.Output = json.RawMessage(`{"forged":true}`) },
	} {
		if code, _, errs := h.run("replay", "--trace", reseal(edit)); code != 5 || !strings.Contains(errs, "seal does not verify") {
			t.Errorf("%s edited and resealed: exit %d %q", name, code, errs)
		}
	}
	unsealed := reseal(func(tr *packrun.Trace) { tr.Seal = nil })
	if code, _, errs := h.run("replay", "--trace", unsealed); code != 5 || !strings.Contains(errs, "not sealed by a host key") {
		t.Errorf("unsealed: exit %d %q", code, errs)
	}
	if out := h.ok("replay", "--trace", unsealed, "--allow-unsealed"); !strings.HasPrefix(out, "identical") {
		t.Errorf("unsealed, allowed: %q", out)
	}
	// Another home has another host key.
	other, _ := probeHome(t)
	other.ok("invoke", "local.probe", "probe.state")
	if code, _, errs := other.run("replay", "--trace", tf); code != 5 || !strings.Contains(errs, "not this host's key") {
		t.Errorf("another host's trace: exit %d %q", code, errs)
	}
	var key string
	for _, line := range strings.Split(h.ok("evidence", "verify"), "\n") {
		if k, ok := strings.CutPrefix(line, "host key "); ok {
			key, _, _ = strings.Cut(k, " ")
		}
	}
	if out := other.ok("replay", "--trace", tf, "--host-key", key); !strings.HasPrefix(out, "identical") {
		t.Errorf("another host's trace, its key trusted: %q", out)
	}
}

// On a fresh machine a trace replays in one command: replay --trace
// creates the home it needs (the pack, its trust policy and the
// exporting host's key given on the command line); home init creates one
// for the commands that only read.
func TestReplayTraceOnAFreshMachine(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"z"}`)
	var att struct {
		AttemptID string `json:"attempt_id"`
	}
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--output", "jsonl")), &att); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, "trace.json")
	h.ok("trace", "export", att.AttemptID, "-o", tf)
	var key string
	for _, line := range strings.Split(h.ok("evidence", "verify"), "\n") {
		if k, ok := strings.CutPrefix(line, "host key "); ok {
			key, _, _ = strings.Cut(k, " ")
		}
	}
	fresh := homeCLI{t, filepath.Join(dir, "fresh")}
	out := fresh.ok("replay", "--trace", tf, "--host-key", key, "--pack", filepath.Join(dir, "hello.pack"), "--trust", filepath.Join(h.home, "trust.json"))
	if !strings.HasPrefix(out, "identical") {
		t.Fatalf("replay on a fresh home: %q", out)
	}

	other := homeCLI{t, filepath.Join(dir, "other")}
	if code, _, _ := other.run("tasks", "list"); code != exitNotFound {
		t.Fatalf("tasks list on no home: exit %d", code)
	}
	if out := other.ok("home", "init"); out != "home "+other.home+"\n" {
		t.Fatalf("home init: %q", out)
	}
	other.ok("home", "init") // an existing home is left as it is
	other.ok("tasks", "list")
}
