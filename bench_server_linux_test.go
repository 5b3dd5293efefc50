package packrun_test

// POST /v1/invoke through `packrun serve` against a raw-wazero HTTP server
// doing the same work, for BENCHMARKS.md ("Issue 30"):
//
//	go test . -run '^$' -bench '^BenchmarkInvokeServer$' -benchtime 2000x -count 1   (repeated; or scripts/bench-compare)
//
// Both servers are processes of their own, so that each one's CPU is read
// from /proc without the clients' (which run in the benchmark process):
//
//   - packrun: the packrun binary built from this tree, `packrun serve` on
//     127.0.0.1 with a bearer token (no --insecure-no-auth), evidence on,
//     the dispatcher running: what an operator runs, except --rate-limit 0
//     (the default 200 requests a second per token would be the ceiling).
//   - raw: this test binary started again as TestRawInvokeServer, a tiny
//     net/http server that runs the same C hello node with wazero's public
//     API only (rawInvokeServer below): packrun's prepared-instance
//     strategy (instances prepared ahead by a background filler, each used
//     once), recycled linear memories, the same engine settings and request
//     envelope, a bearer token compared, no store, no evidence, no schema.
//
// The two take turns in slices of the same run (the first server of each
// slice alternates), so a slow minute of the machine falls on both.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	packrun "github.com/packrun/packrun"
)

// rawServerEnv, when set, makes TestRawInvokeServer serve: its value is
// the bearer token the server accepts.
const rawServerEnv = "PACKRUN_BENCH_RAW_SERVER_TOKEN"

// rawSyncEnv, when set, makes the raw server durable the simplest way: it
// names a file that each request overwrites 4 KiB of (a file written with
// zeros first, as serve's WAL reserve is) and fdatasyncs before answering.
const rawSyncEnv = "PACKRUN_BENCH_RAW_SYNC_FILE"

// rawSyncFileBytes is the size of rawSyncEnv's file, overwritten in turn.
const rawSyncFileBytes = 16 << 20

// BenchmarkInvokeServer: b.N requests to each server per sub-benchmark,
// from 1 and from 32 clients. Reported: req/s of each and their ratio, at
// one client the p50 and p99 round trip of each, and each server's CPU
// (user + system, /proc/PID/stat) per request, idle time between requests
// included, and the system part of it alone (system calls: the disk, the
// network, waking threads). At one client it also reports the p50 of one
// synced 4 KiB write on the disk of packrun's home (fdatasync-ms, measured
// in every slice beside the servers) and the p50 target built from
// it: raw p50 + one fdatasync + 0.1 ms (target-p50-ms). Beside them, at
// one client only, the raw server made durable the simplest way
// (raw-sync: each request overwrites 4 KiB of a file written with zeros
// first and fdatasyncs it before answering, see rawSyncEnv): the floor a
// server that syncs once per request stands on here, its waits included,
// and packrun's p50 over it (packrun/raw-sync-p50). ns/op is suppressed:
// it would mix the servers.
func BenchmarkInvokeServer(b *testing.B) {
	servers := benchInvokeServers(b)
	syncDir := b.TempDir() // beside the home: the same disk
	for _, clients := range []int{1, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			stats := make([]benchServerStats, len(servers))
			var syncs []time.Duration
			rounds := min(6, b.N)
			for s := range rounds {
				n := b.N/rounds + btoi(s < b.N%rounds)
				for k := range servers {
					i := (k + s) % len(servers) // alternate who goes first
					if servers[i].name == "raw-sync" && clients > 1 {
						continue // a floor for one client's latency: at 32 it would sync 32 times apart
					}
					if err := servers[i].load(n, clients, &stats[i]); err != nil {
						b.Fatal(err)
					}
				}
				if clients == 1 {
					d, err := benchFdatasync(syncDir, 50)
					if err != nil {
						b.Fatal(err)
					}
					syncs = append(syncs, d...)
				}
			}
			if clients == 1 {
				slices.Sort(syncs)
				fsync := float64(syncs[len(syncs)/2]) / 1e6
				b.ReportMetric(fsync, "fdatasync-ms")
				b.ReportMetric(stats[1].quantile(0.50)+fsync+0.1, "target-p50-ms")
				b.ReportMetric(stats[0].quantile(0.50)/stats[2].quantile(0.50), "packrun/raw-sync-p50")
			}
			for i, srv := range servers {
				st := &stats[i]
				if st.requests == 0 {
					continue
				}
				b.ReportMetric(float64(st.requests)/st.wall.Seconds(), srv.name+"-req/s")
				b.ReportMetric(float64(st.cpu.Microseconds())/float64(st.requests), srv.name+"-cpu-µs/req")
				b.ReportMetric(float64(st.sys.Microseconds())/float64(st.requests), srv.name+"-sys-µs/req")
				if clients == 1 {
					b.ReportMetric(st.quantile(0.50), srv.name+"-p50-ms")
					b.ReportMetric(st.quantile(0.99), srv.name+"-p99-ms")
				}
			}
			rate := func(st benchServerStats) float64 { return float64(st.requests) / st.wall.Seconds() }
			b.ReportMetric(rate(stats[0])/rate(stats[1]), "packrun/raw-req/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// benchFdatasync times n synced 4 KiB writes appended to a new file in
// dir, each a write and an fdatasync (what `dd bs=4k oflag=dsync` does).
func benchFdatasync(dir string, n int) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fdatasync-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := bytes.Repeat([]byte{'x'}, 4096)
	out := make([]time.Duration, n)
	for i := range out {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return nil, err
		}
		out[i] = time.Since(t0)
	}
	return out, nil
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

// benchInvokeServer is one server process under test and a client for it.
type benchInvokeServer struct {
	name   string
	pid    int
	url    string
	token  string
	client *http.Client
}

type benchServerStats struct {
	requests int
	wall     time.Duration
	cpu, sys time.Duration // user + system; system alone
	lat      []time.Duration
}

func (st *benchServerStats) quantile(p float64) float64 {
	slices.Sort(st.lat)
	return float64(st.lat[int(p*float64(len(st.lat)-1))]) / 1e6
}

// load sends n requests from clients goroutines, adding the wall time,
// the server's CPU time and each round trip to st.
func (s *benchInvokeServer) load(n, clients int, st *benchServerStats) error {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	user0, sys0, err := procCPU(s.pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	for range clients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				r0 := time.Now()
				if err := s.post(false); err != nil {
					errs <- err
					return
				}
				lat[i] = time.Since(r0)
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	user1, sys1, err := procCPU(s.pid)
	if err != nil {
		return err
	}
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	st.requests += n
	st.wall += wall
	st.cpu += user1 - user0 + sys1 - sys0
	st.sys += sys1 - sys0
	st.lat = append(st.lat, lat...)
	return nil
}

// post makes one POST /v1/invoke with the server's token; check also
// checks the node's output.
func (s *benchInvokeServer) post(check bool) error {
	req, err := http.NewRequest(http.MethodPost, s.url+"/v1/invoke", bytes.NewReader(benchInvokeBody))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: POST /v1/invoke: %s: %s", s.name, resp.Status, body)
	}
	if check {
		var r struct {
			Outcome string          `json:"outcome"`
			Output  json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(body, &r); err != nil || r.Outcome != "completed" || string(r.Output) != benchOutput {
			return fmt.Errorf("%s: POST /v1/invoke answered %s (%v)", s.name, body, err)
		}
	}
	return nil
}

// procCPU is the user and the system CPU time pid has used (all its
// threads, living and exited), from /proc/PID/stat in clock ticks
// (USER_HZ, 100 on Linux).
func procCPU(pid int) (user, sys time.Duration, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	const tick = time.Second / 100
	return time.Duration(utime) * tick, time.Duration(stime) * tick, nil
}

// benchInvokeServers starts `packrun serve` and the raw server, each on
// a free 127.0.0.1 port, checks both answer the node's output, and stops
// them when b ends.
func benchInvokeServers(b *testing.B) []*benchInvokeServer {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	bin := filepath.Join(dir, "packrun")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/packrun").CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/packrun: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	h, err := packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		b.Fatal(err)
	}
	err = benchInstall(ctx, h, 1)
	var token string
	if err == nil {
		token, _, err = h.CreateToken(ctx, packrun.TokenSpec{Tenant: "default", Scopes: []packrun.Scope{"invoke"}, Name: "bench"})
	}
	if cerr := h.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatal(err)
	}
	rawToken := "raw-bench-token"
	servers := []*benchInvokeServer{
		benchStartServer(b, "packrun", token, "packrun serving on http://",
			exec.Command(bin, "--home", home, "serve", "--addr", "127.0.0.1:0", "--rate-limit", "0")),
		benchStartServer(b, "raw", rawToken, "raw serving on http://",
			benchRawServerCmd(rawToken, "")),
		benchStartServer(b, "raw-sync", rawToken, "raw serving on http://",
			benchRawServerCmd(rawToken, filepath.Join(dir, "raw-sync"))),
	}
	for _, s := range servers {
		if err := s.post(true); err != nil {
			b.Fatal(err)
		}
		for range 50 { // warm the connection, the pool and the index
			if err := s.post(false); err != nil {
				b.Fatal(err)
			}
		}
	}
	return servers
}

// benchRawServerCmd runs this test binary again as TestRawInvokeServer,
// syncing each request to syncFile if it is not empty.
func benchRawServerCmd(token, syncFile string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestRawInvokeServer$", "-test.count", "1")
	cmd.Env = append(os.Environ(), rawServerEnv+"="+token, rawSyncEnv+"="+syncFile)
	return cmd
}

// benchStartServer starts cmd, waits until it prints a line starting with
// ready followed by its address, and stops it (SIGKILL: its state is
// thrown away) when b ends. It is also killed if this process dies first
// (a benchmark run stopped by a timeout), and its standard input is a pipe
// that closes when this process ends.
func benchStartServer(b *testing.B, name, token, ready string, cmd *exec.Cmd) *benchInvokeServer {
	b.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var said bytes.Buffer
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, ready); ok {
				a, _, _ := strings.Cut(rest, " ")
				addr <- a
				continue
			}
			if said.Len() < 4096 {
				said.WriteString(line + "\n")
			}
		}
		close(addr)
	}()
	b.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	var a string
	select {
	case a = <-addr:
	case <-time.After(60 * time.Second):
	}
	if a == "" {
		b.Fatalf("%s server did not come up: %s", name, said.String())
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128}}
	b.Cleanup(client.CloseIdleConnections)
	return &benchInvokeServer{name: name, pid: cmd.Process.Pid, url: "http://" + a, token: token, client: client}
}

// TestRawInvokeServer is the raw server's process (see the top of this
// file): it serves only when BenchmarkInvokeServer starts it, until its
// standard input closes.
func TestRawInvokeServer(t *testing.T) {
	token := os.Getenv(rawServerEnv)
	if token == "" {
		t.Skip("the raw-wazero server of BenchmarkInvokeServer; serves only when the benchmark starts it")
	}
	ctx := context.Background()
	wasm, err := os.ReadFile(benchModule)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newRawInvokeServer(ctx, wasm, benchPackName, "example.hello", token, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close(ctx)
	if path := os.Getenv(rawSyncEnv); path != "" {
		if s.sync, err = newRawSync(path); err != nil {
			t.Fatal(err)
		}
		defer s.sync.f.Close()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	fmt.Fprintf(os.Stderr, "raw serving on http://%s\n", ln.Addr())
	io.Copy(io.Discard, os.Stdin) // until the benchmark closes it or ends
	srv.Close()
}

// rawInvokeServer answers POST /v1/invoke {"pack":P,"input":{...}} by
// running one node of a reactor module on a fresh instance, with wazero's
// public API alone. It mirrors what packrun's runtime does per invocation
// (runtime/pool.go, runtime/instance.go, runtime/memory.go) and nothing
// else: instances are prepared ahead (instantiated, _initialize run, a
// 4 KiB request buffer taken from openwop_alloc) by one background filler
// into a channel of poolSize; a request takes one, or instantiates its own
// when none is ready; an instance serves one request and is closed, its
// linear memory recycled for the next.
type rawInvokeServer struct {
	rt    wazero.Runtime
	cm    wazero.CompiledModule
	pack  string
	node  uint64
	token []byte
	ready chan *rawInstance
	stop  chan struct{}
	wg    sync.WaitGroup
	bufs  sync.Pool // zeroed linear-memory buffers of the module's initial size
	runID atomic.Uint64
	sync  *rawSync // if set, each request is made durable before its answer
}

// rawSync is the raw server's durability: each request overwrites the
// next 4 KiB of a file written with zeros first, and fdatasyncs it.
type rawSync struct {
	mu   sync.Mutex
	f    *os.File
	next int64
	page []byte
}

func newRawSync(path string) (*rawSync, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(make([]byte, rawSyncFileBytes)); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return &rawSync{f: f, page: bytes.Repeat([]byte{'x'}, 4096)}, nil
}

func (r *rawSync) write() error {
	r.mu.Lock()
	at := r.next
	r.next = (r.next + int64(len(r.page))) % rawSyncFileBytes
	r.mu.Unlock()
	if _, err := r.f.WriteAt(r.page, at); err != nil {
		return err
	}
	return syscall.Fdatasync(int(r.f.Fd()))
}

type rawInstance struct {
	mod    api.Module
	invoke api.Function
	mem    *rawMemory
	reqPtr uint32
}

const (
	rawTimeout   = 30 * time.Second // packrun's default time limit
	rawMemPages  = 2048             // packrun's default 128 MiB
	rawReqBuffer = 4096
)

func newRawInvokeServer(ctx context.Context, wasm []byte, pack, nodeID, token string, poolSize int) (*rawInvokeServer, error) {
	// The engine settings of packrun's runtime.
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCloseOnContextDone(true).WithMemoryLimitPages(rawMemPages))
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	i32 := api.ValueTypeI32
	if _, err := rt.NewHostModuleBuilder("openwop").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {}), []api.ValueType{i32, i32, i32}, nil).
		Export("openwop_log").Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	s := &rawInvokeServer{rt: rt, cm: cm, pack: pack, token: []byte("Bearer " + token),
		ready: make(chan *rawInstance, poolSize), stop: make(chan struct{})}
	// Find the node's index once, on an instance of its own.
	probe, err := s.newInstance(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	defer s.closeInstance(probe)
	n, err := probe.mod.ExportedFunction("openwop_node_count").Call(ctx)
	if err != nil {
		rt.Close(ctx)
		return nil, err
	}
	found := false
	for i := range uint64(uint32(n[0])) {
		pl, err := probe.mod.ExportedFunction("openwop_node_id_at").Call(ctx, i)
		if err != nil {
			rt.Close(ctx)
			return nil, err
		}
		if id, ok := probe.mod.Memory().Read(uint32(pl[0]), uint32(pl[0]>>32)); ok && string(id) == nodeID {
			s.node, found = i, true
			break
		}
	}
	if !found {
		rt.Close(ctx)
		return nil, fmt.Errorf("module has no node %s", nodeID)
	}
	s.wg.Add(1)
	go s.fill()
	return s, nil
}

func (s *rawInvokeServer) newInstance(ctx context.Context) (*rawInstance, error) {
	inst := &rawInstance{}
	ctx, cancel := context.WithTimeout(ctx, rawTimeout)
	defer cancel()
	ctx = experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(func(capacity, _ uint64) experimental.LinearMemory {
		inst.mem = &rawMemory{s: s, limit: rawMemPages * 65536}
		if b, ok := s.bufs.Get().(*[]byte); ok && uint64(cap(*b)) == capacity {
			inst.mem.buf = *b
		} else {
			inst.mem.buf = make([]byte, 0, capacity)
		}
		inst.mem.first = inst.mem.buf
		return inst.mem
	}))
	mod, err := s.rt.InstantiateModule(ctx, s.cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return nil, err
	}
	inst.mod = mod
	if _, err := mod.ExportedFunction("_initialize").Call(ctx); err != nil {
		s.closeInstance(inst)
		return nil, err
	}
	out, err := mod.ExportedFunction("openwop_alloc").Call(ctx, rawReqBuffer)
	if err != nil || uint32(out[0]) == 0 {
		s.closeInstance(inst)
		return nil, fmt.Errorf("openwop_alloc(%d): %v", rawReqBuffer, err)
	}
	inst.reqPtr = uint32(out[0])
	inst.invoke = mod.ExportedFunction("openwop_node_invoke")
	return inst, nil
}

// closeInstance closes inst and recycles its memory (no guest call of it
// is running).
func (s *rawInvokeServer) closeInstance(inst *rawInstance) {
	inst.mod.Close(context.Background())
	if m := inst.mem; m != nil && m.first != nil {
		clear(m.first[:m.peak])
		b := m.first[:0]
		m.first, m.buf = nil, nil
		s.bufs.Put(&b)
	}
}

func (s *rawInvokeServer) fill() {
	defer s.wg.Done()
	for {
		inst, err := s.newInstance(context.Background())
		if err != nil {
			return // requests instantiate their own and see the error
		}
		select {
		case s.ready <- inst:
		case <-s.stop:
			s.closeInstance(inst)
			return
		}
	}
}

func (s *rawInvokeServer) get(ctx context.Context) (*rawInstance, error) {
	select {
	case inst := <-s.ready:
		return inst, nil
	default:
		return s.newInstance(ctx)
	}
}

func (s *rawInvokeServer) close(ctx context.Context) {
	close(s.stop)
	s.wg.Wait()
	for {
		select {
		case inst := <-s.ready:
			s.closeInstance(inst)
		default:
			s.rt.Close(ctx)
			return
		}
	}
}

func (s *rawInvokeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/invoke" || r.Method != http.MethodPost {
		http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), s.token) != 1 {
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Pack  string          `json:"pack"`
		Input json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Pack != s.pack {
		http.Error(w, `{"error":"invalid request"}`, http.StatusBadRequest)
		return
	}
	if len(req.Input) == 0 {
		req.Input = json.RawMessage(`{}`)
	}
	// The request envelope packrun sends (openwop RFC 0008, abi/doc.go).
	env := make([]byte, 0, 128+len(req.Input))
	env = append(env, `{"abiVersion":1,"nodeContext":{"runId":"r`...)
	env = strconv.AppendUint(env, s.runID.Add(1), 10)
	env = append(env, `","nodeId":"example.hello","tenantId":"default","attempt":1},"inputs":`...)
	env = append(env, req.Input...)
	env = append(env, '}')
	if len(env) > rawReqBuffer {
		http.Error(w, `{"error":"input too large"}`, http.StatusRequestEntityTooLarge)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), rawTimeout)
	defer cancel()
	inst, err := s.get(ctx)
	if err != nil {
		http.Error(w, `{"error":"instantiate"}`, http.StatusInternalServerError)
		return
	}
	defer s.closeInstance(inst)
	mem := inst.mod.Memory()
	mem.Write(inst.reqPtr, env)
	out, err := inst.invoke.Call(ctx, s.node, uint64(inst.reqPtr), uint64(len(env)))
	if err != nil {
		http.Error(w, `{"error":"trap"}`, http.StatusInternalServerError)
		return
	}
	view, ok := mem.Read(uint32(out[0]), uint32(out[0]>>32))
	if !ok {
		http.Error(w, `{"error":"response out of bounds"}`, http.StatusInternalServerError)
		return
	}
	var res struct {
		Outcome string          `json:"outcome"`
		Output  json.RawMessage `json:"output,omitempty"`
		Error   json.RawMessage `json:"error,omitempty"`
	}
	if err := json.Unmarshal(view, &res); err != nil { // copies out of the memory
		http.Error(w, `{"error":"bad response"}`, http.StatusInternalServerError)
		return
	}
	answer, _ := json.Marshal(res)
	if s.sync != nil {
		if err := s.sync.write(); err != nil {
			http.Error(w, `{"error":"sync"}`, http.StatusInternalServerError)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

// rawMemory is a linear memory whose first buffer is recycled when its
// instance is closed (runtime/memory.go does the same for packrun).
type rawMemory struct {
	s           *rawInvokeServer
	buf, first  []byte
	peak, limit uint64
}

func (m *rawMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		return nil
	}
	m.peak = max(m.peak, size)
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	nb := make([]byte, size, max(size, min(2*uint64(cap(m.buf)), m.limit)))
	copy(nb, m.buf)
	m.buf, m.first = nb, nil
	return nb
}

func (m *rawMemory) Free() { m.buf = nil }
