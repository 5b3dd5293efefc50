package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/observe"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

// get answers a request to srv with its status and body (owCall).
func get(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	a := owCall(t, url, token, method, "", body)
	return a.code, a.text
}

// metricValue is the value of one series in a Prometheus text exposition
// (name with its labels in the order exposed), or -1 if it is absent.
func metricValue(t *testing.T, text, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", series, err)
	}
	return v
}

// TestMetricsAfterTasks runs tasks, a direct invocation for a tenant and a
// module that breaches its time limit through a real Host served with the
// observer in front, then reads every series off /metrics; the tenant's
// name appears nowhere in it.
func TestMetricsAfterTasks(t *testing.T) {
	home := helloHome(t).home
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs hosttest.SyncBuffer
	obs := observe.New(observe.Config{Log: hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: &logs, JSONFormat: true}), Home: home})
	h, err := packrun.Open(ctx, home, packrun.Config{Workers: 2, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	srv := httptest.NewUnstartedServer(nil)
	apiHandler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: srv.Listener.Addr().String(), InsecureNoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = observed(obs, h, apiHandler, srv.Listener.Addr().String())
	srv.Start()
	defer srv.Close()
	runDone := make(chan error, 1)
	go func() { runDone <- h.Run(ctx) }()
	defer func() { cancel(); <-runDone }()

	const n = 3
	var ids []string
	for i := range n {
		code, body := get(t, "POST", srv.URL+"/v1/tasks", "", fmt.Sprintf(`{"task_type":"hello.c","source":"test","payload":{"name":"m%d"}}`, i))
		if code != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", code, body)
		}
		var rec host.TaskRecord
		if err := json.Unmarshal([]byte(body), &rec); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.TaskID)
	}
	const tenant = "tenant-zq7-secret"
	if code, body := get(t, "POST", srv.URL+"/v1/invoke", "", `{"pack":"local.hello.c","input":{"name":"x"},"tenant":"`+tenant+`"}`); code != http.StatusOK {
		t.Fatalf("invoke: %d %s", code, body)
	}
	loop, err := os.ReadFile("../../testdata/hostile/loop_in_node.wasm")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := h.InvokeModule(ctx, loop, "loop_in_node.wasm", packrun.InvokeRequest{Tenant: tenant, Limits: runtime.Limits{Timeout: 50 * time.Millisecond}})
	if err != nil || inv.Result.Breach() == nil {
		t.Fatalf("loop_in_node: %v, %+v", err, inv)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, id := range ids {
		for {
			rec, err := h.Store().Task(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Status.Terminal() {
				if rec.Status != host.TaskCompleted {
					t.Fatalf("task %s: %s", id, rec.Status)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s still %s", id, rec.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// The tasks are settled; their finish hook runs just after, on the
	// worker: wait for the last line before reading the counters.
	for strings.Count(logs.String(), `"task finished"`) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d task finished lines:\n%s", strings.Count(logs.String(), `"task finished"`), logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	code, text := get(t, "GET", srv.URL+"/metrics", "", "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, text)
	}
	for _, c := range []struct {
		series string
		min    float64
	}{
		{`packrun_attempts_total{outcome="completed",pack="local.hello.c"}`, n + 1},
		{`packrun_attempts_total{outcome="failed",pack="local.hostile.loop_in_node"}`, 1}, // the bare module names its pack
		{`packrun_attempt_duration_seconds_count{pack="local.hello.c"}`, n + 1},
		{`packrun_cap_breaches_total{kind="wasm-execution-time"}`, 1},
		{`packrun_queue_tasks{status="completed"}`, n},
		{`packrun_queue_tasks{status="pending"}`, 0},
		{`packrun_dispatch_lag_seconds_count`, n},
		{`packrun_store_commit_ops_count`, 1},
		{`packrun_store_commit_ops_sum`, 1},
		{`packrun_store_commit_duration_seconds_count`, 1},
		{`packrun_http_requests_total{code="201",route="POST /v1/tasks"}`, n},
		{`packrun_http_requests_total{code="200",route="POST /v1/invoke"}`, 1},
		{`packrun_http_request_duration_seconds_count{route="POST /v1/tasks"}`, n},
		{`packrun_packs_installed`, 1},
		{`packrun_dispatch_lock_held`, 1},
	} {
		if v := metricValue(t, text, c.series); v < c.min {
			t.Errorf("%s = %v, want at least %v", c.series, v, c.min)
		}
	}
	if v := metricValue(t, text, `packrun_queue_tasks{status="completed"}`); v != n {
		t.Errorf("completed tasks = %v, want %d", v, n)
	}
	if !regexp.MustCompile(`(?m)^packrun_build_info\{go="go[^"]+",revision="[^"]+",version="[^"]+",wazero="v[^"]+"\} 1$`).MatchString(text) {
		t.Errorf("no packrun_build_info in\n%s", text)
	}
	if strings.Contains(text, tenant) || strings.Contains(text, `tenant=`) {
		t.Errorf("the tenant is in the metrics:\n%s", text)
	}
	for _, id := range ids {
		if strings.Contains(text, id) {
			t.Errorf("task id %s is in the metrics", id)
		}
	}

	// The well-known document carries the build.
	code, body := get(t, "GET", srv.URL+"/.well-known/packrun", "", "")
	var wk struct {
		Build map[string]any `json:"build"`
	}
	if err := json.Unmarshal([]byte(body), &wk); err != nil || code != http.StatusOK {
		t.Fatalf("well-known: %d %s", code, body)
	}
	for _, k := range []string{"version", "revision", "time", "modified", "go", "wazero", "abiVersions"} {
		if wk.Build[k] == nil {
			t.Errorf("build.%s missing in %s", k, body)
		}
	}

	// Each request and each task start and finish is a log line.
	var requests, started, finished int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		switch l["@message"] {
		case "request":
			requests++
			if l["route"] == "" || l["status"] == nil || l["method"] == nil || l["duration"] == nil {
				t.Errorf("request line without its fields: %s", line)
			}
		case "task started":
			started++
		case "task finished":
			finished++
			if l["pack"] != "local.hello.c" || l["outcome"] != "completed" || l["status"] != "completed" || l["attempt"] != 1.0 || l["task"] == nil || l["type"] != "hello.c" {
				t.Errorf("task finished line: %s", line)
			}
		}
	}
	if requests < n+1 || started != n || finished != n {
		t.Errorf("%d request, %d task started, %d task finished lines:\n%s", requests, started, finished, logs.String())
	}
}

// A second Host on the same home waits as a standby while the first holds
// the dispatch lock: its /readyz says so (200, role standby), the first's
// says dispatcher; both are healthy.
func TestReadyzStandby(t *testing.T) {
	home := helloHome(t).home
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type served struct {
		url       string
		announced *hosttest.SyncBuffer
		done      chan error
	}
	start := func() served {
		var said hosttest.SyncBuffer
		obs := observe.New(observe.Config{Home: home, Announce: func(msg string) { fmt.Fprintln(&said, msg) }})
		h, err := packrun.Open(ctx, home, packrun.Config{Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close(context.Background()) })
		apiHandler, err := h.Handler(ctx, packrun.HandlerOptions{InsecureNoAuth: true})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(observed(obs, h, apiHandler, ""))
		t.Cleanup(srv.Close)
		done := make(chan error, 1)
		go func() { done <- h.Run(ctx) }()
		return served{srv.URL, &said, done}
	}
	waitRole := func(s served, role string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body := get(t, "GET", s.url+"/readyz", "", "")
			if code == http.StatusOK && body == `{"status":"ready","role":"`+role+`"}`+"\n" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %s, want role %s", code, body, role)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	first := start()
	waitRole(first, "dispatcher")
	second := start()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(second.announced.String(), "standby: another packrun holds the dispatch lock of "+home+"; waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("the second host did not say it is a standby: %q", second.announced.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitRole(second, "standby")
	waitRole(first, "dispatcher")
	for _, s := range []served{first, second} {
		if code, body := get(t, "GET", s.url+"/healthz", "", ""); code != http.StatusOK || body != `{"status":"ok"}`+"\n" {
			t.Errorf("/healthz: %d %s", code, body)
		}
	}
	if first.announced.String() != "" {
		t.Errorf("the first host announced %q", first.announced.String())
	}
	cancel()
	<-first.done
	<-second.done
}

// logLines returns the JSON log lines of buf whose @message is msg.
func logLines(t *testing.T, buf string, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split([]byte(buf), []byte("\n")) {
		var l map[string]any
		if json.Unmarshal(line, &l) == nil && l["@message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// `packrun serve --metrics-token T --log-format json --log-level info`:
// /metrics, /healthz and /readyz answer 401 in the error envelope without
// the token (or with another), and with it; each request is a JSON log
// line at info with its route pattern and status, and so is each task's
// start and finish.
func TestServeMetricsToken(t *testing.T) {
	home, bin := servedHome(t)
	const token = "obs-token-42"
	created := homeCLI{t, home}.ok("tokens", "create", "--tenant", "default", "--scopes", "tasks:write")
	apiToken := strings.TrimSpace(created[strings.LastIndex(strings.TrimRight(created, "\n"), "\n")+1:])
	apiTokenID := strings.SplitN(apiToken, "_", 3)[1]
	cmd := exec.Command(bin, "--home", home, "--log-level", "info", "--log-format", "json", "serve", "--addr", "127.0.0.1:0", "--metrics-token", token)
	logs := &hosttest.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		if t.Failed() {
			t.Logf("serve stderr:\n%s", logs.String())
		}
	}()
	s := served{cmd, logs}
	s.waitUp(t)
	m := regexp.MustCompile(`packrun serving on (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no address in %q", logs.String())
	}
	url := m[1]
	for _, path := range observe.Paths {
		for _, bad := range []string{"", "wrong-token", token + "x"} {
			code, body := get(t, "GET", url+path, bad, "")
			var env struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if code != http.StatusUnauthorized || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != "unauthorized" || env.Error.Message == "" {
				t.Errorf("%s with token %q: %d %s", path, bad, code, body)
			}
		}
		if code, body := get(t, "GET", url+path, token, ""); code != http.StatusOK {
			t.Errorf("%s with the token: %d %s", path, code, body)
		}
	}
	// The API is behind its own tokens, not the metrics token.
	if code, body := get(t, "POST", url+"/v1/tasks", token, `{"task_type":"hello.c"}`); code != http.StatusUnauthorized {
		t.Fatalf("enqueue with the metrics token: %d %s", code, body)
	}
	code, body := get(t, "POST", url+"/v1/tasks", apiToken, `{"task_type":"hello.c","source":"test","payload":{"name":"tok"}}`)
	if code != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", code, body)
	}
	var rec host.TaskRecord
	json.Unmarshal([]byte(body), &rec)
	deadline := time.Now().Add(60 * time.Second)
	for len(logLines(t, logs.String(), "task finished")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no task finished line")
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := map[string]bool{}
	for _, l := range logLines(t, logs.String(), "request") {
		if l["@level"] != "info" {
			t.Errorf("request logged at %v", l["@level"])
		}
		got[fmt.Sprintf("%v %v %v", l["method"], l["route"], l["status"])] = true
		if l["route"] == "POST /v1/tasks" && l["status"] == 201.0 && l["token"] != apiTokenID {
			t.Errorf("the enqueue's request line names token %v, want %s", l["token"], apiTokenID)
		}
	}
	for _, want := range []string{"GET GET /metrics 401", "GET GET /metrics 200", "GET GET /healthz 401", "GET GET /healthz 200", "GET GET /readyz 200", "POST POST /v1/tasks 201"} {
		if !got[want] {
			t.Errorf("no request line %q; have %v", want, got)
		}
	}
	started := logLines(t, logs.String(), "task started")
	finished := logLines(t, logs.String(), "task finished")
	if len(started) != 1 || started[0]["task"] != rec.TaskID || len(finished) != 1 || finished[0]["task"] != rec.TaskID ||
		finished[0]["outcome"] != "completed" || finished[0]["pack"] == nil || finished[0]["duration"] == nil || finished[0]["attempt"] != 1.0 {
		t.Errorf("task lines: started %v finished %v", started, finished)
	}
}

// `packrun version`, `packrun --version` and `packrun version --json`
// print the build: a plain test build records no VCS state and says
// "unknown"; the wazero and Go versions and the ABI come from the build.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errs)
		}
		for _, re := range []string{`(?m)^packrun \S+ \(host ABI 1\.\d+`, `(?m)^  revision  unknown$`, `(?m)^  time      unknown$`,
			`(?m)^  modified  unknown$`, `(?m)^  go        go1\.\d+`, `(?m)^  wazero    v1\.\d+\.\d+$`} {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Errorf("%v: %q does not match %s", args, out, re)
			}
		}
	}
	code, out, _ := runCLI(t, "version", "--json")
	var info map[string]any
	if err := json.Unmarshal([]byte(out), &info); err != nil || code != 0 {
		t.Fatalf("version --json: %d %q", code, out)
	}
	for _, k := range []string{"version", "revision", "time", "modified", "go", "wazero", "abiVersions"} {
		if info[k] == nil || info[k] == "" {
			t.Errorf("version --json: no %s in %s", k, out)
		}
	}
}

// A binary whose build names its revision (here with -ldflags -X, which
// also works where the toolchain cannot stamp VCS state) prints it.
func TestVersionStamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "packrun")
	const p = "github.com/packrun/packrun/internal/buildinfo."
	ld := "-X " + p + "revision=0123abcd -X " + p + "vcsTime=2026-01-02T03:04:05Z -X " + p + "modified=false -X " + p + "version=v9.8.7"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"packrun v9.8.7 (host ABI ", "  revision  0123abcd\n", "  time      2026-01-02T03:04:05Z\n", "  modified  false\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("--version: %q lacks %q", out, want)
		}
	}
}
