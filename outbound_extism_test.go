package packrun

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/runtime"
)

// A real Extism plugin (testdata/extism-fetch, built with the Extism Go
// PDK) sends requests with the PDK's HTTPRequest, that is through
// Extism's own http_request: packrun serves it under the pack's grant like
// its own http_request. The secret is injected and reaches the plugin as
// [secret:NAME] in the body and headers; a URL outside the grant and a
// response over the limit fail the node naming why (the latter with a
// cap.breached of kind http-response-bytes) and send nothing outside the
// grant; the exchange replays identically with the server stopped.
func TestExtismPDKHTTPRequest(t *testing.T) {
	srv := newFetchServer(t)
	client := outbound.New(outbound.Config{Limits: outbound.Limits{ResponseBytes: 1 << 10}})
	t.Cleanup(client.Close)
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*"))
	h, err := Open(ctx, home, Config{outbound: client})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(ctx) })
	spec := packSpec{name: "local.extism.pdkfetch", version: "1.0.0", module: "testdata/extism-fetch/fetch.wasm", abiMinor: 3,
		extra: `"grants":{"http":[{"scheme":"http","host":"127.0.0.1","port":` + srv.port + `,"allowRanges":["loopback"],"secrets":[{"name":"example-token","bearer":true}]}]},`,
		nodes: `[{"typeId":"fetch","kind":"node","export":"fetch"}]`}
	if _, _, err := h.Install(ctx, k.sign(t, spec.build(t), spec.name), InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Store().Put(ctx, host.Scope{Tenant: host.DefaultTenant, Namespace: dispatch.SecretsNamespace}, "example-token",
		json.RawMessage(`"`+fetchSecretValue+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	invoke := func(input string) *Invocation {
		t.Helper()
		inv, err := h.InvokePack(ctx, spec.name, InvokeRequest{Node: "fetch", Input: json.RawMessage(input)})
		if err != nil {
			t.Fatal(err)
		}
		return inv
	}

	inv := invoke(`{"method":"GET","url":"` + srv.URL + `/json","headers":{"Accept":"application/json"}}`)
	var out struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
	}
	if inv.Result.Outcome != abi.Completed || json.Unmarshal(inv.Result.Output, &out) != nil {
		t.Fatalf("%s %+v %s", inv.Result.Outcome, inv.Result.Error, inv.Result.Output)
	}
	if got := srv.received(); len(got) != 1 || got[0] != "Bearer "+fetchSecretValue {
		t.Fatalf("the server received Authorization %q", got)
	}
	if want := `{"auth":"Bearer [secret:example-token]","name":"packrun"}`; out.Status != 200 || out.Body != want ||
		out.Headers["x-echo"] != "Bearer [secret:example-token]" || out.Headers["content-type"] != "application/json" {
		t.Fatalf("plugin got %s, want status 200, body %s and the headers by lower-case name", inv.Result.Output, want)
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
	if !strings.Contains(string(traceJSON), abi.ModuleHostV1+"."+abi.HostHTTPRequest) {
		t.Errorf("the trace has no %s.%s: %.300s", abi.ModuleHostV1, abi.HostHTTPRequest, traceJSON)
	}
	for what, b := range map[string][]byte{"output": inv.Result.Output, "stored attempt": record, "trace": traceJSON} {
		if bytes.Contains(b, []byte(fetchSecretValue)) {
			t.Errorf("the secret is in the %s", what)
		}
	}

	outside := invoke(`{"method":"GET","url":"http://127.0.0.1:1/json"}`)
	if e := outside.Result.Error; outside.Result.Outcome != abi.Failed || e == nil || e.Code != runtime.CodeExtismHTTP || !strings.Contains(e.Message, "no http grant allows GET http://127.0.0.1:1/json") {
		t.Errorf("outside the grant: %s %+v", outside.Result.Outcome, e)
	}
	big := invoke(`{"method":"GET","url":"` + srv.URL + `/big"}`)
	if e := big.Result.Error; big.Result.Outcome != abi.Failed || e == nil || e.Code != abi.CodeCapBreached || !strings.Contains(e.Message, "over the limit of 1024 bytes") {
		t.Errorf("response over the limit: %s %+v", big.Result.Outcome, e)
	}
	if !bytes.Contains(big.Attempt.Events, []byte(`"kind":"`+abi.CapHTTPResponseBytes+`"`)) {
		t.Errorf("response over the limit: attempt events %s, want a cap.breached of kind %s", big.Attempt.Events, abi.CapHTTPResponseBytes)
	}
	if n := len(srv.received()); n != 2 {
		t.Errorf("the server got %d requests, want 2 (/json and /big)", n)
	}

	srv.Close()
	v, err := h.Replay(ctx, inv.Attempt.AttemptID, ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Identical || string(v.Got.Output) != string(inv.Result.Output) {
		t.Fatalf("replay with the server stopped: identical %v, %+v %s; output %s", v.Identical, v.Divergence, v.Difference, v.Got.Output)
	}
}
