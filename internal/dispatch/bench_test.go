package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/heapfloor"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

func benchPack(b *testing.B, module, name, nodes, grants string) *packs.Archive {
	b.Helper()
	return benchPackABI(b, 0, module, name, nodes, grants)
}

// benchPackABI is benchPack for a pack that needs ABI minor minor.
func benchPackABI(b *testing.B, minor int, module, name, nodes, grants string) *packs.Archive {
	b.Helper()
	wasm, err := os.ReadFile(module)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":%q,"version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":%d},
		"modules":[{"path":"m.wasm","sha256":%q}]},"nodes":[%s]%s}`, name, minor, hex.EncodeToString(sum[:]), nodes, grants)
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, "m.wasm"), wasm, 0o644)
	raw, err := packs.Pack(dir)
	if err != nil {
		b.Fatal(err)
	}
	arch, err := packs.Read(strings.NewReader(string(raw)), packs.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	return arch
}

func benchEnv(b *testing.B, arch *packs.Archive) (*Dispatcher, *sqlite.Store) {
	b.Helper()
	// As in packrun serve, for both sides of every comparison.
	heapfloor.Raise(HeapFloor)
	ctx := context.Background()
	// Its WAL written ahead, as serve's is (a host up for a while: the WAL
	// at its size between checkpoints).
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "packrun.db"), sqlite.Options{WALReserve: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.AwaitWALReserve(ctx); err != nil {
		b.Fatal(err)
	}
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rt.Close(ctx) })
	d := New(Config{Backend: st, Packs: onePackB{arch}, Runtime: rt})
	b.Cleanup(func() { d.Close(ctx) })
	return d, st
}

type onePackB struct{ arch *packs.Archive }

func (p onePackB) Open(context.Context, string) (*packs.Archive, error) { return p.arch, nil }

var helloInput = json.RawMessage(`{"name":"bench"}`)

// BenchmarkEvidenceCost: durable attempts per second of a hello node on all
// cores, with evidence recorded (on) and not (off) in the same run, so the
// off ÷ on ratio of attempts/s is read from one run — the C one (the figure: the cheapest invocation there is,
// so evidence weighs most) and the Go one (a Go runtime starting in the
// guest, closer to a node doing work): with full evidence (attempt +
// trace + chained event, committed), with the attempt record built but not
// stored (the dispatcher's share of the evidence cost), and with recording
// off (the same invocation straight through the runtime).
func BenchmarkEvidenceCost(b *testing.B) {
	type mode int
	const (
		evidence mode = iota
		builtNotStored
		noEvidence
	)
	big := json.RawMessage(`{"name":"` + strings.Repeat("x", 10_000) + `"}`)
	for _, node := range []struct {
		name, module, pack string
		par                int // goroutines per CPU
		input              json.RawMessage
	}{
		// Many C attempts in flight (128), as a busy host has: commits
		// are grouped, so durability is paid per batch, not per row.
		{"", "../../examples/hello-c/hello.wasm", "local.hello.c", benchPar(), helloInput},
		// A Go invocation takes milliseconds of CPU: 8 in flight keep both
		// cores busy and still share commits.
		{"go/", "../../examples/hello-go/hello.wasm", "local.hello.go", 4, helloInput},
		// The C node with a 10 KB input (and so a 10 KB greeting): what
		// evidence costs as attempts grow (cpu-µs/attempt, on - off).
		{"10k/", "../../examples/hello-c/hello.wasm", "local.hello.c", benchPar(), big},
	} {
		arch := benchPack(b, node.module, node.pack, `{"typeId":"example.hello","kind":"node"}`, "")
		for _, m := range []struct {
			name string
			mode mode
		}{{"on", evidence}, {"built-not-stored", builtNotStored}, {"off", noEvidence}} {
			b.Run(node.name+m.name, func(b *testing.B) {
				d, st := benchEnv(b, arch)
				ctx := context.Background()
				l, err := d.load(ctx, arch, "example.hello", runtime.Limits{})
				if err != nil {
					b.Fatal(err)
				}
				b.SetParallelism(node.par)
				cpu0 := processCPU()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						var err error
						switch m.mode {
						case evidence:
							_, _, err = d.Invoke(ctx, InvokeRequest{Pack: node.pack, Input: node.input})
						case builtNotStored:
							_, _, _, err = d.run(ctx, l, "example.hello", runtime.Invocation{Node: "example.hello", Input: node.input, RunID: newID(), Attempt: 1}, "", nil, false)
						case noEvidence:
							_, err = l.mod.Invoke(ctx, runtime.Invocation{Input: node.input, RunID: "r"})
						}
						if err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
				b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/attempt")
				if ws := st.WriterStats(); ws.Commits > 0 && m.mode == evidence {
					b.ReportMetric(float64(ws.Ops)/float64(ws.Commits), "ops/commit")
					b.ReportMetric(float64(ws.Ops)/float64(ws.Syncs), "ops/sync")
					b.ReportMetric(float64(ws.CPU.Nanoseconds())/1000/float64(ws.Ops), "writer-cpu-µs/attempt")
				}
			})
		}
	}
}

// processCPU is the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQueueRoundTrip: enqueue -> claim -> run a no-op node -> finish,
// durable, one task at a time per worker on all cores.
func BenchmarkQueueRoundTrip(b *testing.B) {
	arch := benchPack(b, "../../testdata/hostile/interrupt.wasm", "local.hostile.interrupt", `{"typeId":"hostile.interrupt","kind":"skill","taskTypes":["noop"]}`, "")
	// interrupt.wasm suspends at once: a node that does nothing but answer.
	d, st := benchEnv(b, arch)
	ctx := context.Background()
	st.SetPackTaskTypes(ctx, "local.hostile.interrupt", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "noop"}, Pack: "local.hostile.interrupt", Node: "hostile.interrupt"}})
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := st.Enqueue(ctx, host.TaskIntent{TaskType: "noop", Source: "bench", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{}); err != nil {
				b.Error(err)
				return
			}
			// Claim the next task: with many workers it may be another's,
			// and another may have taken this one (then wait for more).
			t, err := st.Claim(ctx, "bench", time.Now())
			for errors.Is(err, host.ErrEmpty) {
				time.Sleep(100 * time.Microsecond)
				t, err = st.Claim(ctx, "bench", time.Now())
			}
			if err != nil {
				b.Error(err)
				return
			}
			d.RunTask(ctx, t)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkGuestMemoryCall: one packrun:host/v1 memory call made by a guest
// (the node makes 1000 per invocation), warm, through the grant checks and
// the SQLite store.
func BenchmarkGuestMemoryCall(b *testing.B) {
	arch := benchPack(b, "../../testdata/bench/memloop.wasm", "local.memloop", `{"typeId":"bench.get","kind":"node"},{"typeId":"bench.put","kind":"node"}`,
		`,"grants":{"services":["memory"],"memoryNamespaces":["ns"]}`)
	for _, node := range []string{"bench.put", "bench.get"} {
		b.Run(node, func(b *testing.B) {
			d, _ := benchEnv(b, arch)
			ctx := context.Background()
			l, err := d.load(ctx, arch, node, runtime.Limits{})
			if err != nil {
				b.Fatal(err)
			}
			svc := newServices(binding{backend: d.cfg.Backend, grants: arch.Manifest.Grants, tenant: "t", attemptID: "a"})
			if _, err := l.mod.Invoke(ctx, runtime.Invocation{Node: "bench.put", Services: svc}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := l.mod.Invoke(ctx, runtime.Invocation{Node: node, Services: svc})
				if err != nil || res.Outcome != "completed" {
					b.Fatalf("%v %+v", err, res)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/call")
		})
	}
}

// benchPar is the goroutines per CPU the attempts benchmark keeps in
// flight (default 64, so 128 on two cores); PACKRUN_BENCH_PARALLELISM
// changes it to show how throughput follows concurrency.
func benchPar() int {
	if v, err := strconv.Atoi(os.Getenv("PACKRUN_BENCH_PARALLELISM")); err == nil && v > 0 {
		return v
	}
	return 64
}

// BenchmarkMessagePublish: tasks whose node publishes ten seed-002
// messages each with message_publish (testdata/bench/publoop.c), run
// like BenchmarkQueueRoundTrip (enqueue -> claim -> run -> finish, durable,
// 64 at a time); each message is accepted when its task completes, in the
// write that settles it, with one task for the node subscribed to ops.*.
// msgs/s counts the messages accepted with their tasks created.
func BenchmarkMessagePublish(b *testing.B) {
	arch := benchPackABI(b, 2, "../../testdata/bench/publoop.wasm", "local.publoop", `{"typeId":"bench.publish","kind":"skill","taskTypes":["bench.publish"]}`,
		`,"grants":{"services":["messages"],"topics":["ops.*"]}`)
	d, st := benchEnv(b, arch)
	ctx := context.Background()
	st.SetPackTaskTypes(ctx, "local.publoop", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "bench.publish"}, Pack: "local.publoop", Node: "bench.publish"}})
	if err := st.SetPackSubscriptions(ctx, "local.listen", []host.Subscription{{Pack: "local.listen", Node: "bench.listen", TaskType: host.SubscriberTaskType("bench.listen"), Topics: []string{"ops.*"}}}); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(64)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// Priority 0: ahead of the subscriber's tasks (5), which pile up.
			if _, err := st.Enqueue(ctx, host.TaskIntent{TaskType: "bench.publish", Source: "bench", Priority: host.Priority(0), Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{}); err != nil {
				b.Error(err)
				return
			}
			t, err := st.Claim(ctx, "bench", time.Now())
			for errors.Is(err, host.ErrEmpty) {
				time.Sleep(100 * time.Microsecond)
				t, err = st.Claim(ctx, "bench", time.Now())
			}
			if err != nil {
				b.Error(err)
				return
			}
			d.RunTask(ctx, t)
		}
	})
	b.StopTimer()
	page, err := st.ListMessages(ctx, host.MessageQuery{Topic: "ops.*", Limit: 10})
	if err != nil || len(page.Messages) != 10 || len(page.Messages[9].Deliveries) != 1 {
		b.Fatalf("messages: %v", err)
	}
	listeners, err := st.ListTasks(ctx, host.TaskFilter{TaskType: host.SubscriberTaskType("bench.listen"), Limit: 10})
	if err != nil || len(listeners) != 10 {
		b.Fatalf("subscriber tasks: %d %v", len(listeners), err)
	}
	b.ReportMetric(float64(10*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
