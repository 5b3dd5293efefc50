package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/runtime"
)

// BenchmarkProcessInvokeInstalled: `packrun invoke local.hello.c` as a new
// process (start to output) on an installed C pack with a warm compilation
// cache.
func BenchmarkProcessInvokeInstalled(b *testing.B) {
	dir := b.TempDir()
	bin := buildPackrun(b, dir)
	home := filepath.Join(dir, "home")
	run := func(args ...string) {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("packrun %v: %v\n%s", args, err, out)
		}
	}
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	run("keys", "generate", "--out", key)
	run("pack", "../../examples/hello-c", "-o", pack)
	run("sign", pack, "--key", key+".key")
	run("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	run("install", pack) // also warms the compilation cache
	os.Setenv("PACKRUN_HOME", home)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run("invoke", "local.hello.c", "--input", `{"name":"bench"}`)
	}
}

// buildPackrun builds the packrun binary into dir.
func buildPackrun(b *testing.B, dir string) string {
	b.Helper()
	bin := packrunBinary(b)
	return bin
}

// BenchmarkReplayAll10k: `packrun replay --all` over 10,000 recorded attempts
// of the C hello node (recorded by the dispatcher before the timer).
func BenchmarkReplayAll10k(b *testing.B) {
	dir := b.TempDir()
	home := filepath.Join(dir, "home")
	var out, errb bytes.Buffer
	cli := func(args ...string) {
		out.Reset()
		errb.Reset()
		if code := run(context.Background(), append([]string{"--home", home}, args...), strings.NewReader(""), &out, &errb); code != 0 {
			b.Fatalf("packrun %v: exit %d %s", args, code, errb.String())
		}
	}
	installHelloC(cli, dir)
	ctx := context.Background()
	h, err := packrun.Open(ctx, home, packrun.Config{PoolSize: 2, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 10_000/32+1; i++ {
				if _, err := h.InvokePack(ctx, "local.hello.c", packrun.InvokeRequest{Input: json.RawMessage(fmt.Sprintf(`{"name":"n%d-%d"}`, w, i))}); err != nil {
					b.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	h.Close(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cli("replay", "--all", "--json")
	}
	b.StopTimer()
	var sum struct{ Identical, Diverged, CouldNotRun int }
	json.Unmarshal(out.Bytes(), &sum)
	if sum.Identical < 10_000 || sum.Diverged != 0 || sum.CouldNotRun != 0 {
		b.Fatalf("summary %+v", sum)
	}
	b.ReportMetric(float64(sum.Identical), "attempts")
}

// installHelloC signs and installs the C hello pack through cli (packrun
// with its home set), with a key and the pack written to dir.
func installHelloC(cli func(args ...string), dir string) {
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	cli("keys", "generate", "--out", key)
	cli("pack", "../../examples/hello-c", "-o", pack)
	cli("sign", pack, "--key", key+".key")
	cli("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	cli("install", pack)
}

// BenchmarkServeDrain: `packrun serve` as a process working through 5,000
// queued C hello tasks, from start to the last task settled, with 8 (the
// default) and 32 dispatcher workers.
func BenchmarkServeDrain(b *testing.B) {
	dir := b.TempDir()
	bin := buildPackrun(b, dir)
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	for _, workers := range []int{8, 32} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				home, err := os.MkdirTemp(dir, "home-*")
				if err != nil {
					b.Fatal(err)
				}
				run := func(args ...string) {
					if out, err := exec.Command(bin, append([]string{"--home", home}, args...)...).CombinedOutput(); err != nil {
						b.Fatalf("packrun %v: %v\n%s", args, err, out)
					}
				}
				if _, err := os.Stat(key + ".key"); err != nil {
					run("keys", "generate", "--out", key)
					run("pack", "../../examples/hello-c", "-o", pack)
					run("sign", pack, "--key", key+".key")
				}
				run("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
				run("install", pack)
				ctx := context.Background()
				st := homeStore(b, home)
				// Enqueued 32 at a time (they share commits), before the timer.
				var wg sync.WaitGroup
				errs := make(chan error, 32)
				for w := range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := w; j < drainTasks; j += 32 {
							if _, err := st.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "bench", Payload: json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, j))}, host.EnqueueOptions{}); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				close(errs)
				if err := <-errs; err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				cmd := exec.Command(bin, "--home", home, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth", "--workers", fmt.Sprint(workers))
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				for {
					left, err := st.ListTasks(ctx, host.TaskFilter{Status: host.TaskPending, Limit: 1})
					if err != nil {
						b.Fatal(err)
					}
					running, _ := st.ListTasks(ctx, host.TaskFilter{Status: host.TaskRunning, Limit: 1})
					if len(left) == 0 && len(running) == 0 {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				b.StopTimer()
				cmd.Process.Signal(syscall.SIGTERM)
				cmd.Wait()
				b.StartTimer()
			}
			b.ReportMetric(float64(drainTasks*b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

// drainTasks is large enough that serve's start-up (≈ 0.1 s) is a small
// part of the drain.
const drainTasks = 5000

// BenchmarkEvidenceAt100k: `packrun evidence verify` and `packrun replay
// --all` as processes over a store of 100,000 recorded C hello attempts
// (PACKRUN_BENCH_ATTEMPTS overrides the count), reporting entries or
// attempts per second and the process's peak resident memory.
func BenchmarkEvidenceAt100k(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("PACKRUN_BENCH_ATTEMPTS")); err == nil && v > 0 {
		n = v
	}
	dir := b.TempDir()
	bin := buildPackrun(b, dir)
	home := filepath.Join(dir, "home")
	// PACKRUN_BENCH_HOME keeps the store between runs (for profiling):
	// it is filled the first time and reused as it is after that.
	if keep := os.Getenv("PACKRUN_BENCH_HOME"); keep != "" {
		home = keep
		if _, err := os.Stat(filepath.Join(home, "packrun.db")); err == nil {
			evidenceAt(b, bin, home, n)
			return
		}
	}
	cli := func(args ...string) {
		if out, err := exec.Command(bin, append([]string{"--home", home}, args...)...).CombinedOutput(); err != nil {
			b.Fatalf("packrun %v: %v\n%s", args, err, out)
		}
	}
	installHelloC(cli, dir)
	ctx := context.Background()
	h, err := packrun.Open(ctx, home, packrun.Config{PoolSize: 2, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < 64; w++ {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				if _, err := h.InvokePack(ctx, "local.hello.c", packrun.InvokeRequest{Input: json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i))}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	h.Close(ctx)
	evidenceAt(b, bin, home, n)
}

// evidenceAt times `evidence verify` and `replay --all` as processes on a
// home holding n attempts, each beside its anchor in the same iteration:
// verify beside the Debian sqlite3 CLI selecting the rows it checks piped
// to sha256sum (skipped, and said so, when sqlite3 is absent), replay
// beside n invocations of the same node in this process with recording
// off (the runtime's Module.Invoke on GOMAXPROCS goroutines, as the
// dispatcher runs it). The ratio is packrun's rate over the anchor's.
func evidenceAt(b *testing.B, bin, home string, n int) {
	sqlite3, _ := exec.LookPath("sqlite3")
	sha256sum, _ := exec.LookPath("sha256sum")
	for _, tc := range []struct {
		name   string
		args   []string
		unit   string
		anchor func(b *testing.B) (string, func() time.Duration) // the anchor's CPU time
	}{
		{"verify", []string{"evidence", "verify"}, "entries/s", func(b *testing.B) (string, func() time.Duration) {
			if sqlite3 == "" || sha256sum == "" {
				b.Log("no sqlite3 or sha256sum on PATH: verify is timed without its anchor")
				return "", nil
			}
			return "sqlite3-rows/s", func() time.Duration { return selectRows(b, sqlite3, sha256sum, filepath.Join(home, "packrun.db")) }
		}},
		{"replay-all", []string{"replay", "--all"}, "attempts/s", func(b *testing.B) (string, func() time.Duration) {
			return "off-invocations/s", invokeOff(b, home, n)
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			anchorUnit, anchor := tc.anchor(b)
			// The ru_maxrss of a child Go starts counts this test
			// process's own RSS (the child is spawned sharing its memory
			// until exec), so the peak is read by GNU time, if present.
			timer, _ := exec.LookPath("/usr/bin/time")
			var peak int64
			var took, anchorTook, cpu, anchorCPU time.Duration
			for i := 0; i < b.N; i++ {
				argv := append([]string{bin, "--home", home}, tc.args...)
				if timer != "" {
					argv = append([]string{timer, "-f", "peak-kb %M"}, argv...)
				}
				var stderr bytes.Buffer
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Stderr = &stderr
				t0 := time.Now()
				if out, err := cmd.Output(); err != nil {
					b.Fatalf("packrun %v: %v\n%s%s", tc.args, err, out, stderr.Bytes())
				}
				took += time.Since(t0)
				cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				if _, kb, ok := strings.Cut(stderr.String(), "peak-kb "); ok {
					v, _ := strconv.ParseInt(strings.TrimSpace(kb), 10, 64)
					peak = max(peak, v)
				}
				if anchor != nil {
					t0 := time.Now()
					anchorCPU += anchor()
					anchorTook += time.Since(t0)
				}
			}
			rate := float64(n) * float64(b.N) / took.Seconds()
			b.ReportMetric(rate, tc.unit)
			if anchor != nil {
				anchorRate := float64(n) * float64(b.N) / anchorTook.Seconds()
				b.ReportMetric(anchorRate, anchorUnit)
				b.ReportMetric(rate/anchorRate, "x-anchor")
				// The same ratio in CPU time, which a loaded machine
				// disturbs less than elapsed time.
				b.ReportMetric(anchorCPU.Seconds()/cpu.Seconds(), "x-anchor-cpu")
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(n)/float64(b.N), "cpu-µs/entry")
			if peak > 0 {
				b.ReportMetric(float64(peak)/1024, "peak-MB")
			}
		})
	}
}

// selectRows runs `sqlite3 DB "<select>" | sha256sum`: the rows evidence
// verify checks (both tables of the chain, every column it reads, in seq
// order), read and hashed by the fastest tools at hand. It returns the CPU
// time both used.
func selectRows(b *testing.B, sqlite3, sha256sum, db string) time.Duration {
	q := `SELECT seq, time, type, task_id, attempt_id, data, prev_hash, hash FROM runtime_events ORDER BY seq;
		SELECT seq, attempt_id, task_id, attempt, tenant, pack, started_at, record, prev_hash, hash FROM attempt_records WHERE seq > 0 ORDER BY seq;`
	sel := exec.Command(sqlite3, "-readonly", db, q)
	sum := exec.Command(sha256sum)
	pipe, err := sel.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	sum.Stdin = pipe
	if err := sum.Start(); err != nil {
		b.Fatal(err)
	}
	var stderr bytes.Buffer
	sel.Stderr = &stderr
	if err := sel.Run(); err != nil {
		b.Fatalf("sqlite3: %v %s", err, stderr.Bytes())
	}
	if err := sum.Wait(); err != nil {
		b.Fatalf("sha256sum: %v", err)
	}
	return sel.ProcessState.UserTime() + sel.ProcessState.SystemTime() + sum.ProcessState.UserTime() + sum.ProcessState.SystemTime()
}

// invokeOff loads the C hello node from home's installed pack as the
// dispatcher does (same pool size as replay --all) and returns a function
// that invokes it n times with recording off, on GOMAXPROCS goroutines,
// and returns the CPU time this process used meanwhile.
func invokeOff(b *testing.B, home string, n int) func() time.Duration {
	ctx := context.Background()
	h, err := packrun.Open(ctx, home, packrun.Config{PoolSize: 2, MustExist: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(ctx) })
	arch, err := h.OpenPack(ctx, "local.hello.c")
	if err != nil {
		b.Fatal(err)
	}
	mod, ok := arch.Manifest.NodeModule("example.hello")
	if !ok {
		b.Fatal("no node example.hello")
	}
	wasm, ok := arch.File(mod.Path)
	if !ok {
		b.Fatalf("no module %s in the pack", mod.Path)
	}
	rt, err := h.Runtime(ctx)
	if err != nil {
		b.Fatal(err)
	}
	m, err := rt.Load(ctx, wasm, dispatch.LoadOptions(arch.Manifest, mod, runtime.Limits{}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close(ctx) })
	return func() time.Duration {
		cpu0 := processCPU()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range goruntime.GOMAXPROCS(0) {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if _, err := m.Invoke(ctx, runtime.Invocation{Node: "example.hello", Input: json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i)), RunID: "r"}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return processCPU() - cpu0
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVersionProcess: `packrun version` as a new process, start to
// exit, against /bin/true (the cost of any process here); the two
// alternate within each iteration. Reports ms/op of each and the
// difference, the start-up packrun adds.
func BenchmarkVersionProcess(b *testing.B) {
	bin := buildPackrun(b, b.TempDir())
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true(1) on PATH")
	}
	argvs := [][]string{{bin, "version"}, {truePath}}
	total := make([]time.Duration, len(argvs))
	runOnce := func(i int) {
		t0 := time.Now()
		if out, err := exec.Command(argvs[i][0], argvs[i][1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argvs[i], err, out)
		}
		total[i] += time.Since(t0)
	}
	for i := range argvs { // warm the page cache
		runOnce(i)
		total[i] = 0
	}
	b.ResetTimer()
	for range b.N {
		for i := range argvs {
			runOnce(i)
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(total[0]), "packrun-ms")
	b.ReportMetric(ms(total[1]), "true-ms")
	b.ReportMetric(ms(total[0]-total[1]), "over-true-ms")
	b.ReportMetric(0, "ns/op")
}
