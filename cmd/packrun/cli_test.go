package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// runCLI runs the CLI in-process with a temporary home.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	home := t.TempDir()
	code = run(context.Background(), append([]string{"--home", home}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestInvokeExamples(t *testing.T) {
	for _, ex := range []string{"hello-wat", "hello-wat-multivalue", "hello-c", "hello-go"} {
		code, out, errs := runCLI(t, "invoke", "../../examples/"+ex+"/hello.wasm", "--input", `{"name":"cli"}`)
		if code != 0 || out != `{"greeting":"Hello, cli!"}`+"\n" {
			t.Errorf("%s: exit %d stdout %q stderr %q", ex, code, out, errs)
		}
	}
}

func TestExitCodes(t *testing.T) {
	h := "../../testdata/hostile/"
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"completed with typeId", []string{"invoke", "../../examples/hello-c/hello.wasm", "example.hello"}, 0, ""},
		{"trap", []string{"invoke", h + "unreachable_trap.wasm"}, 2, "failed: trap"},
		{"proc_exit", []string{"invoke", h + "proc_exit.wasm"}, 2, "module_exit"},
		{"bad response", []string{"invoke", h + "invalid_json_response.wasm"}, 2, "response_invalid_json"},
		{"suspended", []string{"invoke", h + "interrupt.wasm"}, 3, "suspended"},
		{"memory cap", []string{"invoke", h + "memory_bomb.wasm", "--max-memory", "2MiB"}, 4, "wasm-memory limit breached: limit 2097152"},
		{"time cap", []string{"invoke", h + "loop_in_node.wasm", "--timeout", "50ms"}, 4, "wasm-execution-time"},
		{"start loop", []string{"invoke", h + "loop_in_start.wasm", "--timeout", "50ms"}, 4, "did not finish within 50ms"},
		{"host calls cap", []string{"invoke", h + "log_flood.wasm", "--max-host-calls", "1000"}, 4, "host-calls"},
		{"output cap", []string{"invoke", h + "output_100mib.wasm"}, 4, "output-size"},
		{"abi 999", []string{"invoke", h + "abi_version_999.wasm"}, 5, "unsupported_abi_version: module is built for ABI version 999 (its openwop_abi_version); this host serves ABI version 1 (packrun:host/v1 up to 1.3)"},
		{"unknown import", []string{"invoke", h + "unknown_import.wasm"}, 5, "env.launch_missiles, openwop.openwop_teleport"},
		{"missing export", []string{"invoke", h + "missing_export.wasm"}, 5, "missing_export"},
		{"not wasm", []string{"invoke", "cli.go"}, 5, "invalid_module"},
		{"no such file", []string{"invoke", "nope.wasm"}, 66, "nope.wasm: no such file"},
		{"unknown node", []string{"invoke", "../../examples/hello-c/hello.wasm", "nope"}, 66, `"nope" is not a node`},
		{"bad input", []string{"invoke", "../../examples/hello-c/hello.wasm", "--input", "{"}, 64, "--input: not valid JSON"},
		{"bad size", []string{"invoke", "../../examples/hello-c/hello.wasm", "--max-memory", "lots"}, 64, "--max-memory"},
		{"unknown flag", []string{"invoke", "--frobnicate"}, 64, "unknown flag"},
		{"no args", []string{"invoke"}, 64, "accepts between 1 and 2"},
		{"unknown command", []string{"frobnicate"}, 64, "unknown command"},
		{"bad log level", []string{"--log-level", "loud", "version"}, 64, "--log-level"},
		{"no workers", []string{"serve", "--workers", "0"}, 64, "--workers 0: must be between 1 and 1024"},
		{"too many workers", []string{"serve", "--workers", "100000"}, 64, "--workers 100000"},
		{"bad WAL reserve", []string{"serve", "--wal-reserve", "lots"}, 64, `--wal-reserve: "lots" is not a size`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runCLI(t, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errs)
			}
			if !strings.Contains(errs, c.stderr) {
				t.Fatalf("stderr %q does not contain %q", errs, c.stderr)
			}
			if strings.Contains(errs, "goroutine ") || strings.Contains(errs, "panic") {
				t.Fatalf("stack trace on stderr: %s", errs)
			}
			if c.code != 0 && c.code != 3 && strings.Count(strings.TrimSpace(errs), "\n") > 1 {
				t.Fatalf("error is not one line: %q", errs)
			}
		})
	}
}

func TestInvokeJSON(t *testing.T) {
	code, out, _ := runCLI(t, "invoke", "../../testdata/hostile/memory_bomb.wasm", "--json", "--max-memory", "1MiB")
	if code != 4 {
		t.Fatalf("exit %d", code)
	}
	var v struct {
		Outcome    string
		Error      struct{ Code string }
		Events     []map[string]any
		Logs       []any
		DurationMs *float64 `json:"duration_ms"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if v.Outcome != "failed" || v.Error.Code != "cap_breached" || len(v.Events) != 1 || v.DurationMs == nil || v.Logs == nil {
		t.Fatalf("json %s", out)
	}
	e := v.Events[0]
	if e["type"] != "cap.breached" || e["kind"] != "wasm-memory" || e["limit"] != float64(1<<20) || e["observed"] != float64(1<<20+65536) {
		t.Fatalf("event %v", e)
	}

	code, out, _ = runCLI(t, "invoke", "../../examples/hello-c/hello.wasm", "--json", "--log-level", "off")
	if code != 0 || !strings.Contains(out, `"output":{"greeting":"Hello, world!"}`) || !strings.Contains(out, `"logs":[{"level":"info","message":"hello invoked"}]`) {
		t.Fatalf("exit %d: %s", code, out)
	}

	code, out, _ = runCLI(t, "invoke", "../../testdata/hostile/unknown_import.wasm", "--json")
	if code != 5 || !strings.Contains(out, `"outcome":"refused"`) || !strings.Contains(out, `"items":["env.launch_missiles","openwop.openwop_teleport"]`) {
		t.Fatalf("exit %d: %s", code, out)
	}
}

func TestResumeFromCLI(t *testing.T) {
	code, out, _ := runCLI(t, "invoke", "../../testdata/hostile/interrupt.wasm", "--run-id", "r1")
	if code != 3 || out != `{"question":"approve?"}`+"\n" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
	code, out, _ = runCLI(t, "invoke", "../../testdata/hostile/interrupt.wasm", "--run-id", "r1", "--resume", `{"approved":true}`)
	if code != 0 || out != `{"resumed":{"approved":true}}`+"\n" {
		t.Fatalf("exit %d stdout %q", code, out)
	}
}

func TestInputFromFileAndStdin(t *testing.T) {
	code, out, errs := runCLI(t, "invoke", "../../examples/hello-c/hello.wasm", "--input", "@../../testdata/modules/name.json")
	if code != 0 || out != `{"greeting":"Hello, file!"}`+"\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errs)
	}
	var o, e bytes.Buffer
	code = run(context.Background(), []string{"--home", t.TempDir(), "invoke", "../../examples/hello-c/hello.wasm", "--input", "@-"}, strings.NewReader(`{"name":"stdin"}`), &o, &e)
	if code != 0 || o.String() != `{"greeting":"Hello, stdin!"}`+"\n" {
		t.Fatalf("exit %d stdout %q stderr %q", code, o.String(), e.String())
	}
}

func TestInspect(t *testing.T) {
	code, out, _ := runCLI(t, "inspect", "../../examples/hello-wat-multivalue/hello.wasm")
	for _, want := range []string{"pack:     local.hello.wat-multivalue", "nodes:    example.hello", "multi-value", "ABI:      1"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
	code, out, _ = runCLI(t, "inspect", "../../examples/hello-go/hello.wasm", "--json")
	var info struct {
		PackName string
		Nodes    []string
		Imports  []string
		Reactor  bool
	}
	if err := json.Unmarshal([]byte(out), &info); code != 0 || err != nil || info.PackName != "local.hello.go" || !info.Reactor || len(info.Imports) == 0 {
		t.Fatalf("exit %d %v: %s", code, err, out)
	}
	code, out, _ = runCLI(t, "inspect", "--host", "--json")
	var host struct {
		ABIVersions []string
		Engine      string
		Namespaces  []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &host); code != 0 || err != nil || host.ABIVersions[0] != "1.3" || !strings.HasPrefix(host.Engine, "wazero") || host.Namespaces[0].Name != "openwop" {
		t.Fatalf("exit %d %v: %s", code, err, out)
	}
	if code, _, errs := runCLI(t, "inspect", "--host", "x.wasm"); code != 64 {
		t.Fatalf("inspect --host with a module: exit %d %s", code, errs)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"65536": 65536, "64KiB": 64 << 10, "16MiB": 16 << 20, "1GiB": 1 << 30, "100MB": 100e6, "2k": 2048} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "12XB", "99999999999999999999GiB"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) accepted", bad)
		}
	}
}

func TestDemo(t *testing.T) {
	home := filepath.Join(t.TempDir(), "demo")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"--home", home, "demo"}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("demo: exit %d\n%s%s", code, out.String(), errb.String())
	}
	// The sensor runs on its schedule at least three times (a run fired
	// just before its schedule is paused is a fourth): its error becomes
	// one task whatever the count, the rest is deduped.
	for _, want := range []string{" completed, 0 failed", "demo.summarize ×1", "hello.c ×2, demo.count ×3", " identical, 0 diverged",
		"deduped; tasks created from them: 1", "evidence   intact", "counters/ada = 3", `summaries/last = {"words":8}`,
		"crisis.detection messages (seed 002, delivered crisis-first)", "evidence: 2 sources, confidence 90", "(demo.responder, completed)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	// It says what it is doing as it goes: a line per step, each with its
	// time since the start, the sensor's runs as they happen.
	var steps []string
	for _, line := range strings.Split(out.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "  · "); ok {
			var secs float64
			if _, err := fmt.Sscanf(rest, "%fs", &secs); err != nil {
				t.Errorf("step without its time: %q", line)
			}
			steps = append(steps, rest)
		}
	}
	if len(steps) < 9 || !strings.Contains(steps[1], "packing, signing and installing") {
		t.Errorf("steps:\n%s", strings.Join(steps, "\n"))
	}
	for i := 1; i <= 3; i++ {
		if !strings.Contains(out.String(), fmt.Sprintf("sensor run %d of 3 done", i)) {
			t.Errorf("no progress line for sensor run %d:\n%s", i, out.String())
		}
	}
	// Every crisis the sensor raised was answered, and the chain covers
	// every message (crises and responses).
	var crises, answered, messages int
	if i := strings.Index(out.String(), "demo.sensor raised "); i < 0 {
		t.Fatalf("no messages line:\n%s", out.String())
	} else if _, err := fmt.Sscanf(out.String()[i:], "demo.sensor raised %d crisis.detection messages (seed 002, delivered crisis-first); demo.responder answered %d", &crises, &answered); err != nil || crises == 0 || answered != crises {
		t.Fatalf("messages line (%d crises, %d answered): %v\n%s", crises, answered, err, out.String())
	}
	if i := strings.Index(out.String(), "attempts and "); i < 0 {
		t.Fatalf("no evidence line:\n%s", out.String())
	} else if _, err := fmt.Sscanf(out.String()[i:], "attempts and %d messages hash-chained", &messages); err != nil || messages != crises+answered {
		t.Fatalf("evidence line: %d messages chained for %d crises and %d answers (%v)\n%s", messages, crises, answered, err, out.String())
	}
	var runs, recorded, deduped int
	if i := strings.Index(out.String(), "demo.sensor ran "); i < 0 {
		t.Fatalf("no sensor line:\n%s", out.String())
	} else if _, err := fmt.Sscanf(out.String()[i:], "demo.sensor ran %d times on its 1s schedule: %d events recorded, %d deduped", &runs, &recorded, &deduped); err != nil {
		t.Fatalf("sensor line: %v\n%s", err, out.String())
	}
	if runs < 3 || recorded != 2*runs || deduped != recorded-2 {
		t.Fatalf("%d runs, %d events recorded, %d deduped", runs, recorded, deduped)
	}
	// Not on a home that is in use.
	if code := run(context.Background(), []string{"--home", home, "demo"}, strings.NewReader(""), &out, &errb); code != 64 {
		t.Fatalf("demo on a used home: exit %d", code)
	}
}
