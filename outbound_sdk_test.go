package packrun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// sdkFetchPacks are the outbound HTTP example skills, one per guest SDK.
var sdkFetchPacks = []struct{ sdk, dir string }{
	{"go", "abi/guest/go/fetch"},
	{"c", "abi/guest/c/example/fetch"},
	{"rust", "abi/guest/rust/example/fetch"},
	{"assemblyscript", "abi/guest/assemblyscript/example/fetch"},
}

// fetchSecretValue is the bearer token the tests store as the secret the
// example packs' grant names.
const fetchSecretValue = "sk-e2e-7c1d0a5b93f2"

// fetchServer is a loopback server answering the example skills: /json a
// JSON document echoing the Authorization header it received, /big a
// body over the tests' response limit, /slow no answer until the client
// gives up.
type fetchServer struct {
	*httptest.Server
	port string
	mu   sync.Mutex
	auth []string // Authorization headers received
}

func newFetchServer(t *testing.T) *fetchServer {
	t.Helper()
	s := &fetchServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		switch r.URL.Path {
		case "/big":
			w.Write(bytes.Repeat([]byte("x"), 4<<10))
		case "/slow":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Echo", r.Header.Get("Authorization"))
			b, _ := json.Marshal(map[string]string{"name": "packrun", "auth": r.Header.Get("Authorization")})
			w.Write(b)
		}
	}))
	t.Cleanup(s.Close)
	_, s.port, _ = net.SplitHostPort(s.Listener.Addr().String())
	return s
}

func (s *fetchServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// examplePack decodes dir's pack.json with the manifest decoder, checks
// its http grant is the loopback one with a bearer secret, and packs a
// copy whose grant names port instead of the committed one.
func examplePack(t *testing.T, dir, port string) (name string, archive []byte) {
	t.Helper()
	raw := mustRead(t, filepath.Join(dir, "pack.json"))
	m, err := packs.DecodeManifest(raw)
	if err != nil {
		t.Fatalf("%s/pack.json: %v", dir, err)
	}
	if g := m.Grants.HTTP; len(g) != 1 || g[0].Host != "127.0.0.1" || len(g[0].Secrets) != 1 || !g[0].Secrets[0].Bearer {
		t.Fatalf("%s/pack.json: http grant %+v", dir, g)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	grant := doc["grants"].(map[string]any)["http"].([]any)[0].(map[string]any)
	grant["port"] = json.Number(port)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := packs.DecodeManifest(b); err != nil {
		t.Fatalf("%s/pack.json with port %s: %v", dir, port, err)
	}
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "pack.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mod := range m.Runtime.Modules {
		if err := os.WriteFile(filepath.Join(out, mod.Path), mustRead(t, filepath.Join(dir, mod.Path)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive, err = packs.Pack(out)
	if err != nil {
		t.Fatal(err)
	}
	return m.Name, archive
}

// fetchHost is a host trusting local.* with the example pack installed
// (its grant on the server's port) and the secret stored for the default
// tenant; its log lines go to logs.
func fetchHost(t *testing.T, dir string, srv *fetchServer, client *outbound.Client) (*Host, string, *hosttest.SyncBuffer) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*"))
	logs := &hosttest.SyncBuffer{}
	// The Go SDK's example is a large module: compiled under the race
	// detector on a loaded machine it has taken more than the default
	// 30 s limit, which is not what these tests are about.
	h, err := Open(ctx, home, Config{outbound: client, compileTimeout: 5 * time.Minute,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	name, archive := examplePack(t, dir, srv.port)
	if _, _, err := h.Install(ctx, k.sign(t, archive, name), InstallOptions{}); err != nil {
		t.Fatalf("install %s: %v", dir, err)
	}
	if err := h.Store().Put(ctx, host.Scope{Tenant: host.DefaultTenant, Namespace: dispatch.SecretsNamespace}, "example-token",
		json.RawMessage(`"`+fetchSecretValue+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	return h, name, logs
}

// Each SDK's example skill, installed in a real home, fetches from a
// loopback server through its grant with the secret injected as a bearer
// token: the server gets it, the output, the stored attempt, the trace and
// the logs never hold it; with the server stopped, replay gives the same
// output from the recorded response.
func TestSDKFetchExamplesEndToEnd(t *testing.T) {
	for _, p := range sdkFetchPacks {
		t.Run(p.sdk, func(t *testing.T) {
			srv := newFetchServer(t)
			h, name, logs := fetchHost(t, p.dir, srv, nil)
			url := srv.URL + "/json"
			inv, err := h.InvokePack(ctx, name, InvokeRequest{Node: "example.fetch", Input: json.RawMessage(`{"url":"` + url + `","field":"auth"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if got := srv.received(); len(got) != 1 || got[0] != "Bearer "+fetchSecretValue {
				t.Fatalf("the server received Authorization %q, want the injected bearer token", got)
			}
			// The guest sees the body with the secret replaced by its name.
			body, _ := json.Marshal(map[string]string{"name": "packrun", "auth": "Bearer " + fetchSecretValue})
			seen := strings.ReplaceAll(string(body), fetchSecretValue, "[secret:example-token]")
			want := fmt.Sprintf(`{"status":200,"length":%d,"value":"Bearer [secret:example-token]"}`, len(seen))
			if inv.Result.Outcome != abi.Completed || !hosttest.JSONEqual(inv.Result.Output, want) {
				t.Fatalf("%s %+v output %s, want %s", inv.Result.Outcome, inv.Result.Error, inv.Result.Output, want)
			}
			stored, err := h.Store().Attempt(ctx, inv.Attempt.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			record, _ := json.Marshal(stored)
			trace, err := h.Trace(ctx, inv.Attempt.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			traceJSON, _ := json.Marshal(trace)
			if !strings.Contains(string(traceJSON), abi.HostHTTPRequest) || !strings.Contains(string(traceJSON), "/json") {
				t.Errorf("the trace has no http_request to /json: %.400s", traceJSON)
			}
			guestLogs, _ := json.Marshal([]any{inv.Result.Logs, inv.Result.Stdout, inv.Result.Stderr})
			for what, b := range map[string][]byte{"output": inv.Result.Output, "stored attempt": record, "trace": traceJSON,
				"guest logs": guestLogs, "host logs": []byte(logs.String())} {
				if bytes.Contains(b, []byte(fetchSecretValue)) {
					t.Errorf("the secret is in the %s", what)
				}
			}

			srv.Close()
			v, err := h.Replay(ctx, inv.Attempt.AttemptID, ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !v.Identical || !hosttest.JSONEqual(v.Got.Output, want) {
				t.Fatalf("replay with the server stopped: identical %v, divergence %+v, %s; output %s", v.Identical, v.Divergence, v.Difference, v.Got.Output)
			}
			if n := len(srv.received()); n != 1 {
				t.Errorf("the server got %d requests, want the replay to send none", n)
			}
		})
	}
}

// Refusals through the real host reach each SDK's example as its error,
// naming the host's reason and, for a limit, its kind (also a cap.breached
// event of the attempt): a URL outside the grant, a response over the
// limit, a server slower than the request timeout, a connection refused.
func TestSDKFetchExamplesRefusals(t *testing.T) {
	for _, p := range sdkFetchPacks {
		t.Run(p.sdk, func(t *testing.T) {
			srv := newFetchServer(t)
			// Only the slow server's host has a short request timeout (the
			// server never answers before it), so a slow machine cannot
			// turn the other cases into timeouts.
			small := outbound.New(outbound.Config{Limits: outbound.Limits{ResponseBytes: 1 << 10}})
			short := outbound.New(outbound.Config{Limits: outbound.Limits{Timeout: 300 * time.Millisecond}})
			t.Cleanup(small.Close)
			t.Cleanup(short.Close)
			h, name, _ := fetchHost(t, p.dir, srv, small)
			hShort, _, _ := fetchHost(t, p.dir, srv, short)
			other := httptest.NewServer(http.NotFoundHandler())
			other.Close()
			for _, tc := range []struct {
				what, url, reason, kind string
				h                       *Host
			}{
				{"outside the grant", other.URL + "/json", "no http grant", "", h},
				{"response over the limit", srv.URL + "/big", "over the limit of 1024 bytes", abi.CapHTTPResponseBytes, h},
				{"slow server", srv.URL + "/slow", "did not finish within 300ms", abi.CapHTTPTimeout, hShort},
				{"connection refused", "STOPPED", "connection refused", "", h},
			} {
				if tc.url == "STOPPED" {
					srv.Close()
					tc.url = srv.URL + "/json"
				}
				inv, err := tc.h.InvokePack(ctx, name, InvokeRequest{Node: "example.fetch", Input: json.RawMessage(`{"url":"` + tc.url + `","field":"name"}`)})
				if err != nil {
					t.Fatal(err)
				}
				res := inv.Result
				if res.Outcome != abi.Failed || res.Error == nil || !strings.Contains(res.Error.Message+string(res.Error.Details), tc.reason) {
					t.Errorf("%s: %s %+v, want a failure naming %q", tc.what, res.Outcome, res.Error, tc.reason)
					continue
				}
				if tc.kind == "" {
					continue
				}
				// The kind is the attempt's cap.breached event (the Go
				// example's error also names it; the C, Rust and
				// AssemblyScript examples report the host's reason only).
				var events []runtime.Event
				if len(inv.Attempt.Events) > 0 {
					if err := json.Unmarshal(inv.Attempt.Events, &events); err != nil {
						t.Fatal(err)
					}
				}
				breached := false
				for _, e := range events {
					breached = breached || (e.Type == runtime.EventCapBreached && e.Kind == tc.kind)
				}
				if !breached {
					t.Errorf("%s: attempt events %s, want a cap.breached of kind %s", tc.what, inv.Attempt.Events, tc.kind)
				}
				if p.sdk == "go" && !strings.Contains(res.Error.Message, tc.kind) {
					t.Errorf("%s: the Go SDK's error %q does not name the kind %s", tc.what, res.Error.Message, tc.kind)
				}
			}
		})
	}
}

// The committed modules are the ones the pack.json files pin (the
// end-to-end tests above run them through the host's own check too).
func TestSDKFetchExamplesPinModules(t *testing.T) {
	for _, p := range sdkFetchPacks {
		m, err := packs.DecodeManifest(mustRead(t, filepath.Join(p.dir, "pack.json")))
		if err != nil {
			t.Fatalf("%s: %v", p.dir, err)
		}
		for _, mod := range m.Runtime.Modules {
			sum := sha256.Sum256(mustRead(t, filepath.Join(p.dir, mod.Path)))
			if hex.EncodeToString(sum[:]) != mod.SHA256 {
				t.Errorf("%s/pack.json pins %s for %s, the file is %x", p.dir, mod.SHA256, mod.Path, sum)
			}
		}
	}
}

// watReadmeSnippet is the wat block of abi/guest/wat/README.md's outbound
// HTTP section.
func watReadmeSnippet(t *testing.T) []string {
	t.Helper()
	readme := string(mustRead(t, "abi/guest/wat/README.md"))
	_, rest, ok := strings.Cut(readme, "### Outbound HTTP")
	if !ok {
		t.Fatal("abi/guest/wat/README.md has no Outbound HTTP section")
	}
	_, rest, ok = strings.Cut(rest, "```wat\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the Outbound HTTP section of abi/guest/wat/README.md has no wat block")
	}
	return strings.Split(strings.TrimSpace(block), "\n")
}

// listenFourDigits listens on a free loopback port of four digits, so the
// snippet's URL keeps its length (95 bytes) with the port changed.
func listenFourDigits(t *testing.T) net.Listener {
	t.Helper()
	for port := 8080; port < 10000; port++ {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			return l
		}
	}
	t.Fatal("no free loopback port of four digits")
	return nil
}

// The WAT README's http_request snippet, built into a node
// (testdata/modules/fetch_readme.wat holds it verbatim), runs through a
// real host: the server gets the injected bearer token, the node's output
// is the response with the secret replaced by its name, the stored attempt
// and trace never hold it, and replay with the server stopped is
// identical. A grant for another port is refused with status 1, the node
// failing with the host's reason.
func TestWATReadmeFetch(t *testing.T) {
	wat := string(mustRead(t, "testdata/modules/fetch_readme.wat"))
	lines := map[string]bool{}
	for _, l := range strings.Split(wat, "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, l := range watReadmeSnippet(t) {
		if l = strings.TrimSpace(l); !strings.HasPrefix(l, ";;") && !lines[l] {
			t.Fatalf("testdata/modules/fetch_readme.wat lacks the README line %q", l)
		}
	}

	var mu sync.Mutex
	var auth []string
	l := listenFourDigits(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]string{"path": r.URL.Path, "accept": r.Header.Get("Accept"), "auth": r.Header.Get("Authorization")})
		w.Write(b)
	}))
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(l.Addr().String())
	wasm := bytes.Replace(mustRead(t, "testdata/modules/fetch_readme.wasm"), []byte("127.0.0.1:8080/status"), []byte("127.0.0.1:"+port+"/status"), 1)
	dir := t.TempDir()
	module := filepath.Join(dir, "fetch_readme.wasm")
	if err := os.WriteFile(module, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	spec := func(version, grantPort string) packSpec {
		return packSpec{name: "local.fetch.wat", version: version, module: module, abiMinor: 3,
			extra: `"grants":{"http":[{"scheme":"http","host":"127.0.0.1","port":` + grantPort + `,"allowRanges":["loopback"],"secrets":[{"name":"api-token","bearer":true}]}]},`,
			nodes: `[{"typeId":"example.status","kind":"node"}]`}
	}
	f.install(t, spec("1.0.0", port))
	if err := f.Store().Put(ctx, host.Scope{Tenant: host.DefaultTenant, Namespace: dispatch.SecretsNamespace}, "api-token",
		json.RawMessage(`"`+fetchSecretValue+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	inv, err := f.InvokePack(ctx, "local.fetch.wat@1.0.0", InvokeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) != 1 || auth[0] != "Bearer "+fetchSecretValue {
		t.Fatalf("the server received Authorization %q", auth)
	}
	var out struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if inv.Result.Outcome != abi.Completed || json.Unmarshal(inv.Result.Output, &out) != nil {
		t.Fatalf("%s %+v %s", inv.Result.Outcome, inv.Result.Error, inv.Result.Output)
	}
	if want := `{"accept":"application/json","auth":"Bearer [secret:api-token]","path":"/status"}`; out.Status != 200 || out.Body != want {
		t.Fatalf("output %s, want status 200 and body %s", inv.Result.Output, want)
	}
	stored, err := f.Store().Attempt(ctx, inv.Attempt.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	record, _ := json.Marshal(stored)
	trace, err := f.Trace(ctx, inv.Attempt.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	traceJSON, _ := json.Marshal(trace)
	for what, b := range map[string][]byte{"output": inv.Result.Output, "stored attempt": record, "trace": traceJSON} {
		if bytes.Contains(b, []byte(fetchSecretValue)) {
			t.Errorf("the secret is in the %s", what)
		}
	}
	srv.Close()
	v, err := f.Replay(ctx, inv.Attempt.AttemptID, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Identical || string(v.Got.Output) != string(inv.Result.Output) {
		t.Fatalf("replay with the server stopped: identical %v, %+v %s; output %s", v.Identical, v.Divergence, v.Difference, v.Got.Output)
	}

	f.install(t, spec("2.0.0", "1"))
	inv, err = f.InvokePack(ctx, "local.fetch.wat@2.0.0", InvokeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if e := inv.Result.Error; inv.Result.Outcome != abi.Failed || e == nil || e.Code != "http_request_failed" || !strings.Contains(string(e.Details), "no http grant allows GET http://127.0.0.1:"+port+"/status") {
		t.Fatalf("outside the grant: %s %+v", inv.Result.Outcome, e)
	}
}

// An Extism plugin (testdata/modules/extism_fetch.wat) calls packrun's
// http_request (packrun:host/v1) under its pack's grant like any node: the
// secret is injected and never reaches it, the exchange replays with the
// server stopped, a URL outside the grant is status 1. The Extism kernel's
// own http_request (extism_fetch) is served under the same grant.
func TestExtismPluginHTTPRequest(t *testing.T) {
	srv := newFetchServer(t)
	f := newFixture(t)
	f.install(t, packSpec{name: "local.extism.fetch", version: "1.0.0", module: "testdata/modules/extism_fetch.wasm", abiMinor: 3,
		extra: `"grants":{"http":[{"scheme":"http","host":"127.0.0.1","port":` + srv.port + `,"allowRanges":["loopback"],"secrets":[{"name":"example-token","bearer":true}]}]},`,
		nodes: `[{"typeId":"fetch","kind":"node","export":"fetch"},{"typeId":"extism_fetch","kind":"node","export":"extism_fetch"}]`})
	if err := f.Store().Put(ctx, host.Scope{Tenant: host.DefaultTenant, Namespace: dispatch.SecretsNamespace}, "example-token",
		json.RawMessage(`"`+fetchSecretValue+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	invoke := func(node, url string) *Invocation {
		t.Helper()
		inv, err := f.InvokePack(ctx, "local.extism.fetch", InvokeRequest{Node: node, Input: json.RawMessage(`{"method":"GET","url":"` + url + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}
	type answer struct {
		Status int `json:"status"`
		Body   struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
			Error  string `json:"error"`
		} `json:"body"`
	}
	inv := invoke("fetch", srv.URL+"/json")
	var a answer
	if inv.Result.Outcome != abi.Completed || json.Unmarshal(inv.Result.Output, &a) != nil {
		t.Fatalf("%s %+v %s", inv.Result.Outcome, inv.Result.Error, inv.Result.Output)
	}
	if got := srv.received(); len(got) != 1 || got[0] != "Bearer "+fetchSecretValue {
		t.Fatalf("the server received Authorization %q", got)
	}
	if want := `{"auth":"Bearer [secret:example-token]","name":"packrun"}`; a.Status != 0 || a.Body.Status != 200 || a.Body.Body != want {
		t.Fatalf("plugin got %s, want status 0 and body %s", inv.Result.Output, want)
	}
	stored, err := f.Store().Attempt(ctx, inv.Attempt.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	record, _ := json.Marshal(stored)
	if bytes.Contains(record, []byte(fetchSecretValue)) || bytes.Contains(inv.Result.Output, []byte(fetchSecretValue)) {
		t.Error("the secret is in the output or the stored attempt")
	}

	outside := invoke("fetch", "http://127.0.0.1:1/json")
	if json.Unmarshal(outside.Result.Output, &a) != nil || a.Status != int(abi.StatusAccessDenied) || !strings.Contains(a.Body.Error, "no http grant") {
		t.Errorf("outside the grant: %s %s", outside.Result.Outcome, outside.Result.Output)
	}

	kernel := invoke("extism_fetch", srv.URL+"/json")
	if want := `{"auth":"Bearer [secret:example-token]","name":"packrun"}`; kernel.Result.Outcome != abi.Completed || string(kernel.Result.Output) != want {
		t.Errorf("extism's own http_request: %s %+v %s, want the body %s", kernel.Result.Outcome, kernel.Result.Error, kernel.Result.Output, want)
	}
	if got := srv.received(); len(got) != 2 || got[1] != "Bearer "+fetchSecretValue {
		t.Errorf("the server received Authorization %q, want two with the injected token", got)
	}

	srv.Close()
	v, err := f.Replay(ctx, inv.Attempt.AttemptID, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Identical || string(v.Got.Output) != string(inv.Result.Output) {
		t.Fatalf("replay with the server stopped: identical %v, %+v %s; output %s", v.Identical, v.Divergence, v.Difference, v.Got.Output)
	}
}
