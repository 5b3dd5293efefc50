package packrun_test

// Benchmarks of one Host's hot path against the number of installed packs,
// for BENCHMARKS.md ("One Host: the hot path and the pack count"):
//
//	go test . -run '^$' -bench 'InvokeHTTP|TaskRoundTrip' -benchtime 3s -count 1   (repeated: the pack counts interleave)
//	go test . -run '^$' -bench InvokeProcess -benchtime 100x -count 3
//
// The subject is the C hello pack (examples/hello-c). Its module says its
// pack is local.hello.c (openwop_pack_name is a constant in hello.c) and
// install checks that name against the manifest's, so "100 installed packs"
// are 100 versions of local.hello.c (1.0.0 … 1.0.99) rather than 100 pack
// names: 100 rows in the store and the index, every one a signed archive
// verified and installed the usual way. It is the harder case for the hot
// path: resolving the bare name walks all 100 versions to pick the newest.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/heapfloor"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

const (
	benchPackName = "local.hello.c"
	benchTaskType = "hello.c" // the hello pack's task type (its pack.json)
	benchModule   = "examples/hello-c/hello.wasm"
	benchInput    = `{"name":"x"}`
	benchOutput   = `{"greeting":"Hello, x!"}`
)

// benchPackCounts are the installed-pack counts every benchmark compares.
var benchPackCounts = []int{1, 100}

// benchSigned is up to 100 signed versions of the hello pack and the trust
// policy that accepts them, built once per process.
var benchSigned = sync.OnceValues(func() (*benchSignedPacks, error) {
	dir, err := os.MkdirTemp("", "packrun-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prefix := filepath.Join(dir, "k")
	if err := registry.GenerateKey(prefix); err != nil {
		return nil, err
	}
	key, err := registry.LoadPrivateKey(prefix + ".key")
	if err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(prefix + ".pub")
	if err != nil {
		return nil, err
	}
	policy := registry.NewPolicy()
	if err := policy.AddKey("bench", pub, []string{"local.*"}); err != nil {
		return nil, err
	}
	manifest, err := os.ReadFile("examples/hello-c/pack.json")
	if err != nil {
		return nil, err
	}
	wasm, err := os.ReadFile(benchModule)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(manifest, &m); err != nil {
		return nil, err
	}
	if m["name"] != benchPackName {
		return nil, fmt.Errorf("examples/hello-c/pack.json names %v, want %s", m["name"], benchPackName)
	}
	out := &benchSignedPacks{policy: policy}
	for i := range slices.Max(benchPackCounts) {
		pd := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(pd, 0o755); err != nil {
			return nil, err
		}
		m["version"] = fmt.Sprintf("1.0.%d", i)
		mb, _ := json.MarshalIndent(m, "", "  ")
		if err := os.WriteFile(filepath.Join(pd, packs.ManifestName), mb, 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(pd, "hello.wasm"), wasm, 0o644); err != nil {
			return nil, err
		}
		archive, err := packs.Pack(pd)
		if err != nil {
			return nil, err
		}
		bundle, prov, err := registry.Sign(context.Background(), archive, benchPackName, key, registry.SignOptions{BuilderID: "local:bench"})
		if err != nil {
			return nil, err
		}
		out.packs = append(out.packs, registry.Signed{Archive: archive, Bundle: bundle, Provenance: prov})
	}
	return out, nil
})

type benchSignedPacks struct {
	policy *registry.Policy
	packs  []registry.Signed // version 1.0.i at index i
}

// benchInstall installs the first n versions of the hello pack into home
// through an open Host.
func benchInstall(ctx context.Context, h *packrun.Host, n int) error {
	sp, err := benchSigned()
	if err != nil {
		return err
	}
	for _, s := range sp.packs[:n] {
		if _, _, err := h.Install(ctx, s, packrun.InstallOptions{Policy: sp.policy}); err != nil {
			return err
		}
	}
	return nil
}

// benchHost returns a Host on a new home holding n installed versions of
// the hello pack, configured as packrun serve configures its own (heap
// floor, 2 pooled instances, 8 workers). It lives as long as parent, so
// the rounds of one sub-benchmark share it.
func benchHost(b, parent *testing.B, n int) *packrun.Host {
	b.Helper()
	heapfloor.Raise(packrun.HeapFloor)
	ctx := context.Background()
	// One tenant's flood is what these benchmarks measure (TaskRoundTrip's
	// enqueues, PostMessage's messages): each is still checked against
	// its quota, with the caps set past what a run sends.
	h, err := packrun.Open(ctx, filepath.Join(parent.TempDir(), "home"), packrun.Config{PoolSize: 2, Workers: 8,
		Quotas: packrun.Quotas{QueuedTasks: 1 << 30, MessagesPerMinute: 1 << 30, SensorEventsPerMinute: 1 << 30}})
	if err != nil {
		b.Fatal(err)
	}
	parent.Cleanup(func() { h.Close(ctx) })
	if err := benchInstall(ctx, h, n); err != nil {
		b.Fatal(err)
	}
	ps, err := h.Packs(ctx)
	if err != nil || len(ps) != n {
		b.Fatalf("%d packs installed (%v), want %d", len(ps), err, n)
	}
	return h
}

// benchPerCount runs f as one sub-benchmark per pack count, each with its
// own Host set up on its first round and kept for the others.
func benchPerCount(b *testing.B, f func(b *testing.B, h *packrun.Host)) {
	for _, n := range benchPackCounts {
		var h *packrun.Host
		b.Run(fmt.Sprintf("packs=%d", n), func(sb *testing.B) {
			if h == nil {
				h = benchHost(sb, b, n)
			}
			f(sb, h)
		})
	}
}

// benchServer serves h's HTTP API on 127.0.0.1:0 with a real http.Server
// (as packrun serve does) and returns its base URL and a client keeping
// enough idle connections for every benchmark goroutine.
func benchServer(b *testing.B, h *packrun.Host) (string, *http.Client) {
	b.Helper()
	ctx := context.Background()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	handler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: ln.Addr().String(), InsecureNoAuth: true})
	if err != nil {
		ln.Close()
		b.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	b.Cleanup(func() {
		client.CloseIdleConnections()
		srv.Close()
	})
	return "http://" + ln.Addr().String(), client
}

var benchInvokeBody = []byte(`{"pack":"` + benchPackName + `","input":` + benchInput + `}`)

// benchPost makes one POST /v1/invoke and checks the node completed with
// the expected output; check=false only checks the status (the hot loop).
func benchPost(client *http.Client, url string, check bool) error {
	resp, err := client.Post(url+"/v1/invoke", "application/json", bytes.NewReader(benchInvokeBody))
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/invoke: %s: %s", resp.Status, body)
	}
	if check {
		var r struct {
			Outcome string          `json:"outcome"`
			Output  json.RawMessage `json:"output"`
			Pack    string          `json:"pack"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		if r.Outcome != "completed" || string(r.Output) != benchOutput {
			return fmt.Errorf("POST /v1/invoke: %s", body)
		}
	}
	return nil
}

// BenchmarkInvokeHTTP: POST /v1/invoke of the C hello node through a real
// HTTP server, 16 clients per core, each request a recorded (durable)
// attempt; with 1 and 100 installed packs.
func BenchmarkInvokeHTTP(b *testing.B) {
	benchPerCount(b, func(b *testing.B, h *packrun.Host) {
		url, client := benchServer(b, h)
		if err := benchPost(client, url, true); err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(16)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := benchPost(client, url, false); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}

// BenchmarkInvokeHTTPLatency: the same request from one client, one at a
// time; p50 and p99 of the round trip as seen by the client.
func BenchmarkInvokeHTTPLatency(b *testing.B) {
	benchPerCount(b, func(b *testing.B, h *packrun.Host) {
		url, client := benchServer(b, h)
		for range 20 { // warm the connection, the pool and the index
			if err := benchPost(client, url, true); err != nil {
				b.Fatal(err)
			}
		}
		lat := make([]time.Duration, b.N)
		b.ResetTimer()
		for i := range b.N {
			t0 := time.Now()
			if err := benchPost(client, url, false); err != nil {
				b.Fatal(err)
			}
			lat[i] = time.Since(t0)
		}
		b.StopTimer()
		slices.Sort(lat)
		q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
		b.ReportMetric(q(0.50), "p50-ms")
		b.ReportMetric(q(0.99), "p99-ms")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}

// BenchmarkTaskRoundTrip: tasks of the hello pack's task type enqueued by
// 32 clients (Host.Enqueue, which wakes the dispatcher) while Host.Run
// works them off with 8 workers; timed from the first enqueue until every
// task has completed (one poller watches the queue, then each task is
// checked). With 1 and 100 installed packs.
func BenchmarkTaskRoundTrip(b *testing.B) {
	benchPerCount(b, func(b *testing.B, h *packrun.Host) {
		ctx, cancel := context.WithCancel(context.Background())
		runDone := make(chan error, 1)
		go func() { runDone <- h.Run(ctx) }()
		defer func() {
			cancel()
			if err := <-runDone; err != nil {
				b.Error(err)
			}
		}()
		st := h.Store()
		// One task first: the dispatcher is up and the module loaded.
		if ids, err := benchEnqueue(ctx, h, 1, 1); err != nil {
			b.Fatal(err)
		} else if err := benchAwait(ctx, st, ids, 30*time.Second); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		ids, err := benchEnqueue(ctx, h, b.N, 32)
		if err != nil {
			b.Fatal(err)
		}
		if err := benchAwait(ctx, st, ids, 5*time.Minute); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		for _, id := range ids {
			t, err := st.Task(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if t.Status != host.TaskCompleted {
				b.Fatalf("task %s: %s (%s)", id, t.Status, t.LastError)
			}
		}
	})
}

// benchEnqueue enqueues n hello tasks from clients goroutines and returns
// their ids.
func benchEnqueue(ctx context.Context, h *packrun.Host, n, clients int) ([]string, error) {
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				t, err := h.Enqueue(ctx, host.TaskIntent{TaskType: benchTaskType, Source: "bench", Payload: json.RawMessage(benchInput)}, host.EnqueueOptions{})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = t.TaskID
			}
		}()
	}
	wg.Wait()
	close(errs)
	return ids, <-errs
}

// benchAwait waits until no task is pending or running, then until each
// of ids has settled.
func benchAwait(ctx context.Context, st host.Backend, ids []string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for _, s := range []host.TaskStatus{host.TaskPending, host.TaskRunning} {
		for {
			ts, err := st.ListTasks(ctx, host.TaskFilter{Status: s, Limit: 1})
			if err != nil {
				return err
			}
			if len(ts) == 0 {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("tasks still %s after %v", s, within)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	for _, id := range ids {
		for {
			t, err := st.Task(ctx, id)
			if err != nil {
				return err
			}
			if t.Status != host.TaskPending && t.Status != host.TaskRunning {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("task %s still %s after %v", id, t.Status, within)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// BenchmarkInvokeProcess: `packrun invoke local.hello.c --input
// '{"name":"x"}'` as a new process on a home where the pack is installed
// (warm compilation cache), against a minimal CLI doing the same with
// wazero alone (internal/benchcli/rawwazero: load hello.wasm with a
// compilation cache, instantiate with WASI, invoke the node through the
// openwop exports, print the output). The two alternate within each
// iteration; ms/op of each and their ratio are reported from the same run.
func BenchmarkInvokeProcess(b *testing.B) {
	dir := b.TempDir()
	bin, raw := filepath.Join(dir, "packrun"), filepath.Join(dir, "rawwazero")
	for _, c := range [][]string{
		{"go", "build", "-o", bin, "./cmd/packrun"},
		{"go", "build", "-tags", "rawwazero", "-o", raw, "./internal/benchcli/rawwazero"},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	ctx := context.Background()
	home := filepath.Join(dir, "home")
	h, err := packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		b.Fatal(err)
	}
	err = benchInstall(ctx, h, 1) // also warms the home's compilation cache
	if cerr := h.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	module, err := filepath.Abs(benchModule)
	if err != nil {
		b.Fatal(err)
	}
	rawCache := filepath.Join(dir, "rawcache")
	cmds := []*benchCmd{
		{name: "packrun", argv: []string{bin, "--home", home, "invoke", benchPackName, "--input", benchInput}},
		{name: "raw", argv: []string{raw, module, rawCache, "example.hello", benchInput}},
	}
	env := append(os.Environ(), "PACKRUN_HOME="+home)
	for _, c := range cmds { // warm-up: the raw CLI fills its cache
		if err := c.run(dir, env); err != nil {
			b.Fatal(err)
		}
		c.total = 0
	}
	b.ResetTimer()
	for range b.N {
		for _, c := range cmds {
			if err := c.run(dir, env); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	ms := func(c *benchCmd) float64 { return float64(c.total) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(cmds[0]), "packrun-ms")
	b.ReportMetric(ms(cmds[1]), "raw-ms")
	b.ReportMetric(ms(cmds[0])/ms(cmds[1]), "ratio")
}

// benchCmd is one command of BenchmarkInvokeProcess and the time its runs
// took, start to exit.
type benchCmd struct {
	name  string
	argv  []string
	total time.Duration
}

func (c *benchCmd) run(dir string, env []string) error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	c.total += time.Since(t0)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s: %v: %s", c.name, err, stderr.Bytes())
		}
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if got := strings.TrimSpace(stdout.String()); got != benchOutput {
		return fmt.Errorf("%s printed %q, want %s", c.name, got, benchOutput)
	}
	return nil
}
