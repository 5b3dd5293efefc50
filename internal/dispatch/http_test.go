package dispatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	gort "runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/outbound"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// loopDNS resolves every name to 127.0.0.1: the tests' servers.
type loopDNS struct{}

func (loopDNS) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

type fetchEnv struct {
	env
	srv  *httptest.Server
	pack *packs.Archive
	port string
	mu   sync.Mutex
	seen []string // Authorization headers the server received
}

const fetchSecret = "tok-3f9a1c77e2"

// newFetchEnv serves testdata/modules/fetch.wasm as local.fetch (ABI 1.3)
// with an http grant for https://example.com:PORT/ (loopback allowed,
// secret "api" as a bearer token) against an echo server, the request
// config "req" being req (PORT replaced).
func newFetchEnv(t testing.TB, grant, req string, limits outbound.Limits) *fetchEnv {
	t.Helper()
	f := &fetchEnv{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/1k" {
			f.mu.Lock()
			f.seen = append(f.seen, r.Header.Get("Authorization"))
			f.mu.Unlock()
		}
		if r.URL.Path == "/1k" {
			io.Copy(io.Discard, r.Body)
			w.Write(kilobyte)
			return
		}
		if r.URL.Path == "/big" {
			w.Write([]byte(strings.Repeat("0123456789", 1<<20)))
			return
		}
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		fmt.Fprintf(w, "you sent %s %s auth=%s", r.Method, r.URL.Path, r.Header.Get("Authorization"))
	}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	t.Cleanup(f.srv.Close)
	_, f.port, _ = net.SplitHostPort(f.srv.Listener.Addr().String())
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	grant = strings.ReplaceAll(grant, "PORT", f.port)
	f.pack, _ = wasmPack(t, "fetch.wasm", `"name":"local.fetch","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":3},
		"modules":[{"path":"fetch.wasm","sha256":%q}]},"nodes":[{"typeId":"test.fetch","kind":"node"},{"typeId":"test.fetch2","kind":"node"},{"typeId":"test.nofetch","kind":"node"},{"typeId":"test.fetchk","kind":"node"}],
		"grants":{"services":["config"],"http":[`+grant+`]}`)
	f.env = newEnvWith(t, f.pack)
	f.d.cfg.Outbound = outbound.New(outbound.Config{Resolver: loopDNS{}, RootCAs: pool, Limits: limits})
	f.d.cfg.PackConfig = map[string]json.RawMessage{"local.fetch": json.RawMessage(`{"req":` + strings.ReplaceAll(req, "PORT", f.port) + `}`)}
	if err := f.backend.Put(context.Background(), host.Scope{Tenant: host.DefaultTenant, Namespace: SecretsNamespace}, "api",
		json.RawMessage(`"`+fetchSecret+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	return f
}

const fetchGrant = `{"host":"example.com","port":PORT,"methods":["GET"],"allowRanges":["loopback"],"secrets":[{"name":"api","bearer":true}]}`

type fetchOut struct {
	S string          `json:"s"`
	R json.RawMessage `json:"r"`
}

func (f *fetchEnv) invoke(t *testing.T, node string) (*host.Attempt, *runtime.Result, fetchOut) {
	t.Helper()
	att, res, err := f.d.InvokeArchive(context.Background(), f.arch(t), InvokeRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != abi.Completed {
		t.Fatalf("outcome %s: %+v", res.Outcome, res.Error)
	}
	var out fetchOut
	if err := json.Unmarshal(res.Output, &out); err != nil {
		t.Fatalf("output %s: %v", res.Output, err)
	}
	return att, res, out
}

func (f *fetchEnv) arch(*testing.T) *packs.Archive { return f.pack }

// recordSize encodes the attempt's evidence record and reports its length
// and whether its trace is kept out of line.
func recordSize(t *testing.T, a *host.Attempt) (int, bool) {
	t.Helper()
	rec := evidence.AppendRecord(nil, a)
	_, _, refs, err := evidence.DecodeRecordRefs(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.Name() == "trace" {
			return len(rec), true
		}
	}
	return len(rec), false
}

// Node test.fetchk sends its request 16 times in one invocation (the
// benchmarks' per-request figure) and outputs a digest: every request
// reached the server and is in the trace.
func TestHTTPRequestManyInOneInvocation(t *testing.T) {
	f := newFetchEnv(t, fetchGrant, `{"url":"https://example.com:PORT/a","method":"GET"}`, outbound.Limits{})
	_, res, err := f.d.InvokeArchive(context.Background(), f.arch(t), InvokeRequest{Node: "test.fetchk"})
	if err != nil || res.Outcome != abi.Completed {
		t.Fatalf("%v %+v", err, res)
	}
	if string(res.Output) != `{"s":"00","n":"16"}` {
		t.Fatalf("output %s, want 16 answers with status 0", res.Output)
	}
	calls := 0
	for _, c := range res.Trace {
		if strings.HasSuffix(c.Fn, abi.HostHTTPRequest) {
			calls++
		}
	}
	f.mu.Lock()
	seen := len(f.seen)
	f.mu.Unlock()
	if calls != 16 || seen != 16 {
		t.Fatalf("trace has %d http_request calls, the server saw %d requests; want 16", calls, seen)
	}
}

// The guest fetches through its grant with the secret injected: the server
// sees the secret, the guest, the trace and the stored attempt never do.
func TestHTTPRequestInjectsSecretTheGuestNeverSees(t *testing.T) {
	f := newFetchEnv(t, fetchGrant, `{"url":"https://example.com:PORT/a","method":"GET"}`, outbound.Limits{})
	att, res, out := f.invoke(t, "test.fetch")
	if out.S != "00" || !strings.Contains(string(out.R), `you sent GET /a auth=Bearer [secret:api]`) || !strings.Contains(string(out.R), `["X-Echo","Bearer [secret:api]"]`) {
		t.Fatalf("guest got %s %s", out.S, out.R)
	}
	if len(f.seen) != 1 || f.seen[0] != "Bearer "+fetchSecret {
		t.Fatalf("the server saw %q", f.seen)
	}
	trace, _ := json.Marshal(res.Trace)
	if !strings.Contains(string(trace), "http_request") {
		t.Fatalf("no http_request in the trace: %s", trace)
	}
	stored, err := f.backend.Attempt(context.Background(), att.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := json.Marshal(stored)
	for name, b := range map[string][]byte{"output": res.Output, "trace": trace, "stored attempt": all} {
		if strings.Contains(string(b), fetchSecret) {
			t.Errorf("the secret is in the %s", name)
		}
	}
}

// Replay serves the recorded response with the server stopped and gives
// the same output; a pack version asking for another URL diverges at the
// http_request, naming it.
func TestHTTPRequestReplaysWithoutTheNetwork(t *testing.T) {
	f := newFetchEnv(t, fetchGrant, `{"url":"https://example.com:PORT/a","method":"GET"}`, outbound.Limits{})
	_, res, _ := f.invoke(t, "test.fetch")
	f.srv.Close()
	l, err := f.d.load(context.Background(), f.arch(t), "test.fetch", runtime.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := l.mod.Invoke(context.Background(), runtime.Invocation{Node: "test.fetch", Replay: &runtime.Replay{Calls: res.Trace}})
	if err != nil {
		t.Fatal(err)
	}
	if again.Divergence != nil || string(again.Output) != string(res.Output) {
		t.Fatalf("replay: %v\n%s\nwant\n%s", again.Divergence, again.Output, res.Output)
	}
	other, err := l.mod.Invoke(context.Background(), runtime.Invocation{Node: "test.fetch2", Replay: &runtime.Replay{Calls: res.Trace}})
	if err != nil {
		t.Fatal(err)
	}
	d := other.Divergence
	if d == nil || d.Index != 1 || !strings.Contains(d.Reason, "http_request") || !strings.Contains(d.Reason, "GET https://example.com:"+f.port+"/b") {
		t.Fatalf("divergence %+v", d)
	}
}

// The answers the guest gets for refusals and limits, each with its
// status; a limit hit is also a cap.breached event of the attempt.
func TestHTTPRequestRefusalsAndBreaches(t *testing.T) {
	for _, tc := range []struct {
		name, grant, req string
		limits           outbound.Limits
		status, kind     string
	}{
		{"no grant for the destination", fetchGrant, `{"url":"https://other.example.com:PORT/a","method":"GET"}`, outbound.Limits{}, "01", ""},
		{"loopback not allowed (rebinding)", `{"host":"example.com","port":PORT}`, `{"url":"https://example.com:PORT/a","method":"GET"}`, outbound.Limits{}, "01", ""},
		{"127.0.0.1", `{"host":"example.com","port":PORT}`, `{"url":"https://127.0.0.1:PORT/a","method":"GET"}`, outbound.Limits{}, "01", ""},
		{"CR/LF in a header value", fetchGrant, `{"url":"https://example.com:PORT/a","headers":[["X-A","v\r\nHost: evil"]],"method":"GET"}`, outbound.Limits{}, "10", ""},
		{"response over the limit", `{"host":"example.com","port":PORT,"allowRanges":["loopback"]}`, `{"url":"https://example.com:PORT/big","method":"GET"}`, outbound.Limits{ResponseBytes: 1 << 10}, "20", abi.CapHTTPResponseBytes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFetchEnv(t, tc.grant, tc.req, tc.limits)
			att, _, out := f.invoke(t, "test.fetch")
			var body map[string]string
			if out.S != tc.status || json.Unmarshal(out.R, &body) != nil || body["error"] == "" || body["kind"] != tc.kind {
				t.Fatalf("guest got %s %s", out.S, out.R)
			}
			if tc.kind != "" && !strings.Contains(string(att.Events), `"kind":"`+tc.kind+`"`) {
				t.Errorf("no cap.breached event of kind %s: %s", tc.kind, att.Events)
			}
			if len(f.seen) != 0 && tc.status == "01" {
				t.Errorf("the server was reached: %q", f.seen)
			}
		})
	}
}

// A 10 MB download is recorded once, out of line: the trace is a value
// the record names by digest, so the attempt's record stays small.
func TestHTTPRequestLargeBodyOutOfLine(t *testing.T) {
	f := newFetchEnv(t, `{"host":"example.com","port":PORT,"allowRanges":["loopback"]}`, `{"url":"https://example.com:PORT/big","method":"GET"}`,
		outbound.Limits{ResponseBytes: 11 << 20, Timeout: time.Minute})
	att, res, out := f.invoke(t, "test.fetch")
	if out.S != "00" || len(out.R) < 10<<20 {
		t.Fatalf("guest got %s, %d bytes", out.S, len(out.R))
	}
	if len(res.Trace) != 2 || len(res.Trace[1].Result) < 10<<20 {
		t.Fatalf("trace %d calls", len(res.Trace))
	}
	size, outOfLine := recordSize(t, att)
	if !outOfLine || size > 4<<10 {
		t.Fatalf("the attempt's record is %d bytes, trace out of line %v: the body was not stored out of line", size, outOfLine)
	}
}

var kilobyte = []byte(strings.Repeat("k", 1024))

// fetchK is how many requests node test.fetchk makes in one invocation.
const fetchK = 16

// reportCPU reports the process CPU time per operation since start
// (client and in-process server together): steadier than wall time on a
// shared machine.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((processCPU()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkHTTPRequest compares, in one run, a plain net/http GET of a
// 1 KiB body from a loopback TLS server (HTTP/2, the same transport
// settings) with the same GET through internal/outbound, and through the
// http_request import of a guest (a whole invocation: config_get, the
// request, the output). "baseline" is the same invocation of the same
// module without the request (node test.nofetch); "interleaved" runs
// plain, baseline and guest in turn each iteration and reports each one's
// CPU and wall time, the import's overhead (guest - baseline - plain) and
// the ratio (guest - baseline) / plain.
func BenchmarkHTTPRequest(b *testing.B) { benchHTTPRequest(b, nil) }

// BenchmarkHTTPRequestPost is BenchmarkHTTPRequest with a POST of a 1 KiB
// body (1 KiB each way), in the guest's request as a "body" string.
func BenchmarkHTTPRequestPost(b *testing.B) { benchHTTPRequest(b, kilobyte) }

func benchHTTPRequest(b *testing.B, body []byte) {
	method, req, grant := "GET", `{"url":"https://example.com:PORT/1k","method":"GET"}`, `{"host":"example.com","port":PORT,"allowRanges":["loopback"]}`
	if body != nil {
		method, req = "POST", `{"url":"https://example.com:PORT/1k","method":"POST","body":"`+string(body)+`"}`
		grant = `{"host":"example.com","port":PORT,"methods":["POST"],"allowRanges":["loopback"]}`
	}
	f := newFetchEnv(b, grant, req, outbound.Limits{})
	defer f.srv.Close()
	url := "https://example.com:" + f.port + "/1k"
	ctx := context.Background()
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	d := &net.Dialer{}
	c := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, "127.0.0.1:"+f.port)
		}}}
	plain := func(b *testing.B) {
		hreq, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		resp, err := c.Do(hreq)
		if err != nil {
			b.Fatal(err)
		}
		if body, _ := io.ReadAll(resp.Body); len(body) != 1024 {
			b.Fatal(len(body))
		}
		resp.Body.Close()
	}
	b.Run("plain", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		for b.Loop() {
			plain(b)
		}
	})
	b.Run("outbound", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		for b.Loop() {
			s := f.d.cfg.Outbound.Session(f.pack.Manifest.Grants.HTTP, nil)
			if resp, err := s.Do(ctx, outbound.Request{Method: method, URL: url, Body: body}); err != nil || len(resp.Body) != 1024 {
				b.Fatal(err)
			}
		}
	})
	l, err := f.d.load(ctx, f.pack, "test.fetch", runtime.Limits{})
	if err != nil {
		b.Fatal(err)
	}
	invokeNode := func(b *testing.B, node, want string) {
		svc := newServices(binding{backend: f.backend, grants: f.pack.Manifest.Grants, config: f.d.cfg.PackConfig["local.fetch"], outbound: f.d.cfg.Outbound})
		res, err := l.mod.Invoke(ctx, runtime.Invocation{Node: node, Services: svc})
		if err != nil || !strings.Contains(string(res.Output), want) {
			b.Fatal(err, string(res.Output))
		}
	}
	invoke := func(b *testing.B) { invokeNode(b, "test.fetch", `"s":"00","r":{"status":200`) }
	baseline := func(b *testing.B) { invokeNode(b, "test.nofetch", `"s":"00","r":null`) }
	b.Run("baseline", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		for b.Loop() {
			baseline(b)
		}
	})
	b.Run("guest", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		for b.Loop() {
			invoke(b)
		}
	})
	b.Run("interleaved", func(b *testing.B) {
		var cpu, wall [3]time.Duration
		for b.Loop() {
			for i, run := range []func(*testing.B){plain, baseline, invoke} {
				c0, w0 := processCPU(), time.Now()
				run(b)
				wall[i] += time.Since(w0)
				cpu[i] += processCPU() - c0
			}
		}
		per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
		// The request through the import costs guest - baseline; its
		// overhead is that minus the plain request.
		b.ReportMetric(per(cpu[0]), "plain-cpu-ns/op")
		b.ReportMetric(per(cpu[1]), "baseline-cpu-ns/op")
		b.ReportMetric(per(cpu[2]), "guest-cpu-ns/op")
		b.ReportMetric(per(cpu[2]-cpu[1]-cpu[0]), "overhead-cpu-ns/op")
		b.ReportMetric(float64(cpu[2]-cpu[1])/float64(cpu[0]), "import/plain-cpu")
		b.ReportMetric(per(wall[2]-wall[1]-wall[0]), "overhead-wall-ns/op")
		b.ReportMetric(float64(wall[2]-wall[1])/float64(wall[0]), "import/plain-wall")
	})
	// guest-16: one invocation making fetchK requests (node test.fetchk,
	// a small digest as output). The import's cost per request is
	// (guest-16 - guest) / (fetchK - 1): the invocation and its output are
	// counted once in both and cancel out.
	invokeK := func(b *testing.B) { invokeNode(b, "test.fetchk", `"s":"00","n":"16"`) }
	b.Run("guest-16", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		for b.Loop() {
			invokeK(b)
		}
	})
	// interleaved-16 runs fetchK plain requests, a one-request invocation
	// and a fetchK-request invocation in turn each iteration.
	b.Run("interleaved-16", func(b *testing.B) {
		plainK := func(b *testing.B) {
			for range fetchK {
				plain(b)
			}
		}
		var cpu, wall [3]time.Duration
		for b.Loop() {
			for i, run := range []func(*testing.B){plainK, invoke, invokeK} {
				c0, w0 := processCPU(), time.Now()
				run(b)
				wall[i] += time.Since(w0)
				cpu[i] += processCPU() - c0
			}
		}
		perReq := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N*fetchK) }
		importCPU := float64((cpu[2] - cpu[1]).Nanoseconds()) / float64(b.N*(fetchK-1))
		importWall := float64((wall[2] - wall[1]).Nanoseconds()) / float64(b.N*(fetchK-1))
		b.ReportMetric(perReq(cpu[0]), "plain-cpu-ns/req")
		b.ReportMetric(importCPU, "import-cpu-ns/req")
		b.ReportMetric(importCPU-perReq(cpu[0]), "overhead-cpu-ns/req")
		b.ReportMetric(importCPU/perReq(cpu[0]), "import/plain-cpu")
		b.ReportMetric(importWall/perReq(wall[0]), "import/plain-wall")
	})
	// Throughput: 32 goroutines of plain requests beside 32 concurrent
	// invocations each making fetchK requests; req/s counts requests.
	concurrent := func(run func(*testing.B), perOp int) func(*testing.B) {
		return func(b *testing.B) {
			defer reportCPU(b, processCPU())
			b.ReportAllocs()
			b.SetParallelism((32 + gort.GOMAXPROCS(0) - 1) / gort.GOMAXPROCS(0))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					run(b)
				}
			})
			b.ReportMetric(float64(b.N*perOp)/time.Since(start).Seconds(), "req/s")
		}
	}
	b.Run("plain-32-concurrent", concurrent(plain, 1))
	b.Run("guest-16-32-concurrent", concurrent(invokeK, fetchK))
	b.Run("guest-32-concurrent", func(b *testing.B) {
		defer reportCPU(b, processCPU())
		b.ReportAllocs()
		b.SetParallelism((32 + gort.GOMAXPROCS(0) - 1) / gort.GOMAXPROCS(0))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				invoke(b)
			}
		})
	})
}

// outboundSpy is an Observer that also sees outbound requests.
type outboundSpy struct {
	nopObserver
	mu    sync.Mutex
	hosts []string
}

func (s *outboundSpy) OutboundRequest(grantHost string, sent, received int64, _ time.Duration, _ error) {
	s.mu.Lock()
	s.hosts = append(s.hosts, fmt.Sprintf("%s %d/%d", grantHost, sent, received))
	s.mu.Unlock()
}

// Without a client of its own, the dispatcher's outbound client reports
// each request to an Observer that has OutboundRequest (the metrics).
func TestDefaultOutboundReportsToTheObserver(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	defer srv.Close()
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	spy := &outboundSpy{}
	d := New(Config{Observer: spy})
	var port int
	fmt.Sscan(p, &port)
	s := d.cfg.Outbound.Session([]packs.HTTPGrant{{Scheme: "http", Host: "127.0.0.1", Port: port, AllowRanges: []string{"loopback"}}}, nil)
	if _, err := s.Do(context.Background(), outbound.Request{URL: "http://127.0.0.1:" + p + "/"}); err != nil {
		t.Fatal(err)
	}
	if len(spy.hosts) != 1 || spy.hosts[0] != "127.0.0.1 0/5" {
		t.Fatalf("observer saw %q", spy.hosts)
	}
}
