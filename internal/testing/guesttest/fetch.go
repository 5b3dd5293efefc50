package guesttest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

// CheckFetchExample checks an SDK's outbound HTTP example skill, the pack
// in dir: its pack.json declares ABI 1.3, pins the committed module and
// grants http to a loopback destination (allowRanges ["loopback"]) with a
// secret sent as a bearer token; the module needs ABI 1.3; its node
// example.fetch, given {"url","field"}, sends a GET with only an Accept
// header (the token is the host's to add) and returns {status, length,
// value}; a refusal fails the invocation naming the host's reason.
func CheckFetchExample(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pack.json"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Runtime struct {
			ABI struct {
				Version, Minor int
			} `json:"abi"`
			Modules []struct {
				Path, SHA256 string
			} `json:"modules"`
		} `json:"runtime"`
		Grants struct {
			HTTP []struct {
				Scheme, Host string
				Port         int
				AllowRanges  []string `json:"allowRanges"`
				Secrets      []struct {
					Name   string
					Bearer bool
				}
			} `json:"http"`
		} `json:"grants"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s/pack.json: %v", dir, err)
	}
	if (abi.Version{Major: p.Runtime.ABI.Version, Minor: p.Runtime.ABI.Minor}) != ABI13 || len(p.Runtime.Modules) != 1 {
		t.Fatalf("%s/pack.json: abi %v, modules %+v", dir, p.Runtime.ABI, p.Runtime.Modules)
	}
	if g := p.Grants.HTTP; len(g) != 1 || g[0].Host != "127.0.0.1" || !slices.Equal(g[0].AllowRanges, []string{"loopback"}) ||
		len(g[0].Secrets) != 1 || !g[0].Secrets[0].Bearer || g[0].Secrets[0].Name == "" {
		t.Errorf("%s/pack.json: http grant %+v, want 127.0.0.1 with loopback allowed and one bearer secret", dir, g)
	}
	path := filepath.Join(dir, p.Runtime.Modules[0].Path)
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != p.Runtime.Modules[0].SHA256 {
		t.Errorf("%s/pack.json pins sha256 %s, the module is %x", dir, p.Runtime.Modules[0].SHA256, sum)
	}

	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	if m, err := rt.Load(ctx, wasm, runtime.LoadOptions{ABI: ABI12}); err == nil || !strings.Contains(err.Error(), abi.HostHTTPRequest) {
		if err == nil {
			m.Close(ctx)
		}
		t.Errorf("%s loads for a pack declaring ABI 1.2 (or is refused without naming http_request): %v", path, err)
	}

	m := hosttest.Load(t, wasm, runtime.LoadOptions{ABI: ABI13})
	svc := NewServices()
	res := hosttest.Invoke(t, m, runtime.Invocation{Node: "example.fetch", Services: svc,
		Input: json.RawMessage(`{"url":"` + HTTPBase + `/json","field":"name"}`)})
	hosttest.Completed(t, res, `{"status":200,"length":24,"value":"packrun"}`)
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.fetch", Services: svc,
		Input: json.RawMessage(`{"url":"` + HTTPBase + `/json","field":"absent"}`)})
	hosttest.Completed(t, res, `{"status":200,"length":24,"value":null}`)
	want := `{"method":"GET","url":"` + HTTPBase + `/json","headers":[["Accept","application/json"]]}`
	if calls := svc.CallsOf(abi.HostHTTPRequest); len(calls) != 2 || !hosttest.JSONEqual(calls[0].Raw, want) {
		t.Errorf("http_request calls %v, want two of %s", calls, want)
	}
	res = hosttest.Invoke(t, m, runtime.Invocation{Node: "example.fetch", Services: svc,
		Input: json.RawMessage(`{"url":"` + HTTPBase + `/denied","field":"name"}`)})
	if res.Outcome != abi.Failed || res.Error == nil || !strings.Contains(res.Error.Message+string(res.Error.Details), "no http grant for 127.0.0.1:8080") {
		t.Errorf("denied: %s %+v, want a failure naming the host's reason", res.Outcome, res.Error)
	}
}
