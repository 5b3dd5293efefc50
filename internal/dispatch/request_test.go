package dispatch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// TestInvokeRequestCheck: the one request type checks itself (the API and
// the Host both call Check; neither converts it), defaulting the tenant.
func TestInvokeRequestCheck(t *testing.T) {
	req := InvokeRequest{Pack: "p"}
	if err := req.Check(); err != nil || req.Tenant != host.DefaultTenant {
		t.Fatalf("Check() = %v, tenant %q; want nil, %q", err, req.Tenant, host.DefaultTenant)
	}
	for _, c := range []struct {
		req  InvokeRequest
		want string
	}{
		{InvokeRequest{Attempt: -1}, "attempt -1"},
		{InvokeRequest{Limits: runtime.Limits{MemoryBytes: 1000}}, "below one 64 KiB page"},
		{InvokeRequest{Input: json.RawMessage(`{`)}, "input is not valid JSON"},
		{InvokeRequest{Resume: []json.RawMessage{json.RawMessage(`1`), json.RawMessage(`x`)}}, "resume value 2"},
		{InvokeRequest{Tenant: "no spaces allowed"}, "invoke"},
	} {
		err := c.req.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Check(%+v) = %v; want one line naming %q", c.req, err, c.want)
		}
	}
}

// TestAttemptNumber: 1 at least unless AttemptGiven (openwop counts from 0).
func TestAttemptNumber(t *testing.T) {
	for _, c := range []struct {
		req  InvokeRequest
		want int
	}{{InvokeRequest{}, 1}, {InvokeRequest{Attempt: 3}, 3}, {InvokeRequest{AttemptGiven: true}, 0}} {
		if got := c.req.AttemptNumber(); got != c.want {
			t.Errorf("%+v.AttemptNumber() = %d, want %d", c.req, got, c.want)
		}
	}
}

// TestModuleLimits: a manifest's limits under a request's, in one
// function for packs and bare modules alike; zero fields are left for the
// runtime's defaults.
func TestModuleLimits(t *testing.T) {
	m := &packs.Manifest{Runtime: packs.Runtime{Limits: packs.RuntimeLimits{TimeoutMs: 1500, MemoryPages: 16}}}
	got := ModuleLimits(m, runtime.Limits{Timeout: 2 * time.Second, HostCalls: 7})
	want := runtime.Limits{MemoryBytes: 16 << 16, Timeout: 2 * time.Second, HostCalls: 7}
	if got != want {
		t.Errorf("ModuleLimits(pack) = %+v, want %+v", got, want)
	}
	if got := ModuleLimits(nil, runtime.Limits{OutputBytes: 9}); got != (runtime.Limits{OutputBytes: 9}) {
		t.Errorf("ModuleLimits(bare) = %+v, want only the override", got)
	}
	if o := BareLoadOptions("m.wasm", runtime.Limits{HostCalls: 3}); o.Name != "m.wasm" || o.Limits != (runtime.Limits{HostCalls: 3}) {
		t.Errorf("BareLoadOptions = %+v", o)
	}
}
