//go:build linux

package pgbench

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/heapfloor"
	"github.com/packrun/packrun/internal/store/postgres"
	"github.com/packrun/packrun/internal/testing/pgtest"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// inFlight is how many round trips run at once, as in River's anchor
// (ANCHORS.md): 128 goroutines, each enqueueing one job and waiting for it
// to finish before the next.
const inFlight = 128

// oneWay is the simulated network latency each way between a node and
// the database behind the proxy: a 0.5 ms round trip.
const oneWay = 250 * time.Microsecond

// BenchmarkPGRoundTrip: the durable round trip on one PostgreSQL server,
// River v0.51.1 beside packrun with 1, 2 and 3 nodes, first with the
// clients on the server's port, then each through its own delaying proxy
// (net=0.5ms). Run the test binary several times for interleaved
// figures (-count repeats each sub-benchmark back to back). packrun's round trip:
// enqueue (its own transaction) → claim → run the C hello node through
// the dispatcher → settle with its attempt recorded. River's: Insert (its
// own transaction) → fetched by a worker → no-op → completed (seen on a
// completion subscription), with River's benchmark fetch settings.
//
// Metrics: jobs/s; p50-ms, enqueue to finished; cpu-µs/job of this
// process (clients and nodes) and pg-cpu-µs/job of the server's
// processes; and from pg_stat_activity sampled every 10 ms, the mean
// number of the database's backends active, waiting on an advisory lock
// (packrun's chain lock), waiting for the client (ClientRead: the round
// trips) and waiting on WAL I/O, and chainlock-held, the share of samples
// in which a transaction held the chain lock (packrun's ChainLock, from
// pg_locks: near 1 means the lock is the limit); for packrun, empty-claims/job: claims
// that found the queue empty and polled again; behind the proxy,
// flights/job, the requests (or pipelines of them) the clients sent: the
// network round trips.
//
// With PGBENCH_STATEMENTS=FILE and the server started with
// PGTEST_OPTIONS="-c shared_preload_libraries=pg_stat_statements", each
// case appends to FILE the statements its database ran
// (pg_stat_statements: calls, rows, time and planning time per job, by
// statement; add "-c pg_stat_statements.track_planning=on" for the
// planning time).
func BenchmarkPGRoundTrip(b *testing.B) {
	heapfloor.Raise(dispatch.HeapFloor) // as packrun serve does
	arch := helloPack(b)
	for _, net := range []struct {
		name  string
		delay time.Duration
	}{{"net=local", 0}, {"net=0.5ms", oneWay}} {
		b.Run(net.name+"/river", func(b *testing.B) { benchRiver(b, net.delay) })
		for _, n := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("%s/nodes=%d", net.name, n), func(b *testing.B) { benchNodes(b, arch, n, net.delay) })
		}
	}
}

// helloPack is the C hello pack (examples/hello-c) as installed.
func helloPack(b *testing.B) *packs.Archive {
	raw, err := packs.Pack("../../../../examples/hello-c")
	if err != nil {
		b.Fatal(err)
	}
	arch, err := packs.Read(strings.NewReader(string(raw)), packs.DefaultLimits())
	if err != nil {
		b.Fatal(err)
	}
	return arch
}

type onePack struct{ arch *packs.Archive }

func (p onePack) Open(context.Context, string) (*packs.Archive, error) { return p.arch, nil }

// via returns dsn pointing at a new proxy to its server when delay > 0.
func via(b *testing.B, dsn string, delay time.Duration) string {
	if delay == 0 {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	u.Host = startProxy(b, u.Host, delay).Addr()
	return u.String()
}

func benchNodes(b *testing.B, arch *packs.Archive, n int, delay time.Duration) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	disps := make([]*dispatch.Dispatcher, n)
	runners := make([]string, n)
	stores := make([]*postgres.Store, n)
	for i := range n {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		st, err := postgres.Open(ctx, via(b, dsn, delay), postgres.Options{MaxConns: 16, HostKey: key, CheckpointFile: filepath.Join(b.TempDir(), "evidence-head.json")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		rt, err := runtime.New(ctx, runtime.NewConfig())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rt.Close(ctx) })
		runners[i] = fmt.Sprintf("node%d", i)
		d := dispatch.New(dispatch.Config{Backend: st, Packs: onePack{arch}, Runtime: rt, RunnerID: runners[i]})
		b.Cleanup(func() { d.Close(ctx) })
		stores[i], disps[i] = st, d
	}
	route := []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "hello.c"}, Pack: "local.hello.c", Node: "example.hello"}}
	if err := stores[0].SetPackTaskTypes(ctx, "local.hello.c", route); err != nil {
		b.Fatal(err)
	}
	var empty atomic.Int64
	run(b, dsn, func(w int) error {
		st, d, runner := stores[w%n], disps[w%n], runners[w%n]
		if _, err := st.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "bench", Payload: json.RawMessage(`{"name":"bench"}`)}, host.EnqueueOptions{}); err != nil {
			return err
		}
		// The claim may take another worker's task, and find none while
		// others hold them all: then it polls, as the dispatcher does.
		t, err := st.Claim(ctx, runner, time.Now())
		for errors.Is(err, host.ErrEmpty) {
			empty.Add(1)
			time.Sleep(100 * time.Microsecond)
			t, err = st.Claim(ctx, runner, time.Now())
		}
		if err != nil {
			return err
		}
		d.RunTask(ctx, t)
		return nil
	})
	b.ReportMetric(float64(empty.Load())/float64(b.N), "empty-claims/job")
	// Every task ran the node and settled completed, its attempt recorded.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var tasks, completed, attempts int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'completed'), (SELECT count(*) FROM attempt_records) FROM tasks`).Scan(&tasks, &completed, &attempts); err != nil {
		b.Fatal(err)
	}
	if tasks != b.N || completed != b.N || attempts != b.N {
		b.Fatalf("%d tasks, %d completed, %d attempts recorded; want %d each", tasks, completed, attempts, b.N)
	}
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

func benchRiver(b *testing.B, delay time.Duration) {
	ctx := context.Background()
	dsn := pgtest.DSN(b)
	cfg, err := pgxpool.ParseConfig(via(b, dsn, delay))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 16 // as one packrun node's pool
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: inFlight}},
		Workers:           workers,
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		b.Fatal(err)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: 16 * inFlight})
	defer cancel()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		sctx, c := context.WithTimeout(ctx, 30*time.Second)
		defer c()
		client.Stop(sctx)
	})
	// Completions are matched to their inserts by job id; one may come
	// before its Insert returned.
	var mu sync.Mutex
	waiting := map[int64]chan struct{}{}
	early := map[int64]bool{}
	go func() {
		for ev := range events {
			mu.Lock()
			if ch, ok := waiting[ev.Job.ID]; ok {
				close(ch)
				delete(waiting, ev.Job.ID)
			} else {
				early[ev.Job.ID] = true
			}
			mu.Unlock()
		}
	}()
	run(b, dsn, func(int) error {
		res, err := client.Insert(ctx, noopArgs{}, nil)
		if err != nil {
			return err
		}
		ch := make(chan struct{})
		mu.Lock()
		if early[res.Job.ID] {
			delete(early, res.Job.ID)
			close(ch)
		} else {
			waiting[res.Job.ID] = ch
		}
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("river job %d not completed within a minute", res.Job.ID)
		}
	})
}

// run times b.N round trips made by inFlight workers (roundTrip(w) for
// worker w) and reports the metrics of BenchmarkPGRoundTrip.
func run(b *testing.B, dsn string, roundTrip func(w int) error) {
	srv := pgtest.Shared(b)
	db := strings.TrimPrefix(mustURL(b, dsn).Path, "/")
	stopSampling := sampleWaits(b, srv.DSN("postgres"), db)
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	statements := countStatements(b, dsn)
	flights0 := flights.Load()
	cpu0, pg0 := processCPU(), serverCPU(srv.Dir)
	b.ResetTimer()
	for w := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < b.N && failed.Load() == nil; i = int(next.Add(1)) - 1 {
				start := time.Now()
				if err := roundTrip(w); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(start)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu, pg := processCPU()-cpu0, serverCPU(srv.Dir)-pg0
	sent := flights.Load() - flights0
	waits := stopSampling()
	statements()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
	if pg > 0 {
		b.ReportMetric(float64(pg.Microseconds())/float64(b.N), "pg-cpu-µs/job")
	}
	if sent > 0 {
		b.ReportMetric(float64(sent)/float64(b.N), "flights/job")
	}
	for _, k := range []string{"active", "advisory", "clientread", "wal", "chainlock-held"} {
		b.ReportMetric(waits[k], k)
	}
}

// countStatements, with PGBENCH_STATEMENTS=FILE, resets
// pg_stat_statements and returns a function that appends to FILE, per
// job, what database dsn ran since: each statement's calls, rows, time
// (planning and executing) and planning time, the costliest first. Otherwise it does nothing.
func countStatements(b *testing.B, dsn string) func() {
	file := os.Getenv("PGBENCH_STATEMENTS")
	if file == "" {
		return func() {}
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`); err != nil {
		b.Fatalf("pg_stat_statements (start the server with PGTEST_OPTIONS=\"-c shared_preload_libraries=pg_stat_statements\"): %v", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_stat_statements_reset()`); err != nil {
		b.Fatal(err)
	}
	return func() {
		defer conn.Close(ctx)
		rows, err := conn.Query(ctx, `SELECT calls, rows, total_exec_time + total_plan_time, total_plan_time, regexp_replace(query, '\s+', ' ', 'g')
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND query NOT LIKE '%pg_stat_statements%' ORDER BY total_exec_time DESC`)
		if err != nil {
			b.Fatal(err)
		}
		defer rows.Close()
		n := float64(b.N)
		var all, ms float64
		var out strings.Builder
		for rows.Next() {
			var c, r int64
			var t, plan float64
			var q string
			if err := rows.Scan(&c, &r, &t, &plan, &q); err != nil {
				b.Fatal(err)
			}
			all, ms = all+float64(c), ms+t
			if len(q) > 110 {
				q = q[:110] + "…"
			}
			fmt.Fprintf(&out, "%8.3f %8.3f %8.1f %8.1f  %s\n", float64(c)/n, float64(r)/n, t*1000/n, plan*1000/n, q)
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		f, err := os.OpenFile(file, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		fmt.Fprintf(f, "%s, %d jobs: %.2f statements per job, planning and executing %.0f µs\n   calls     rows  time-µs  plan-µs  statement\n%s\n",
			b.Name(), b.N, all/n, ms*1000/n, out.String())
	}
}

func mustURL(b *testing.B, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		b.Fatal(err)
	}
	return u
}

// sampleWaits samples pg_stat_activity for database db every 10 ms until
// the returned function is called, which returns the mean number of its
// backends active, waiting on an advisory lock, waiting to read from
// their client, and waiting on WAL I/O, and how often the chain lock was
// held.
func sampleWaits(b *testing.B, adminDSN, db string) func() map[string]float64 {
	ctx, cancel := context.WithCancel(context.Background())
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		b.Fatal(err)
	}
	// pg_locks shows a bigint advisory key as classid (high 32 bits) and
	// objid (low 32 bits), objsubid 1.
	key := postgres.ChainLock
	chainHi, chainLo := int64(uint64(key)>>32), int64(uint64(key)&0xffffffff)
	sums := map[string]float64{}
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var active, advisory, clientRead, wal, held int
			err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state <> 'idle'),
				count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'),
				count(*) FILTER (WHERE state <> 'idle' AND wait_event = 'ClientRead'),
				count(*) FILTER (WHERE wait_event LIKE 'WAL%'),
				(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
					AND classid::bigint = $2 AND objid::bigint = $3
					AND database = (SELECT oid FROM pg_database WHERE datname = $1))
				FROM pg_stat_activity WHERE datname = $1`, db, chainHi, chainLo).Scan(&active, &advisory, &clientRead, &wal, &held)
			if err != nil {
				return
			}
			samples++
			sums["active"] += float64(active)
			sums["advisory"] += float64(advisory)
			sums["clientread"] += float64(clientRead)
			sums["wal"] += float64(wal)
			sums["chainlock-held"] += float64(held)
		}
	}()
	return func() map[string]float64 {
		cancel()
		<-done
		conn.Close(context.Background())
		for k := range sums {
			sums[k] /= float64(max(samples, 1))
		}
		return sums
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

// serverCPU is the CPU time of the PostgreSQL server in dir: the
// postmaster's own and its exited children's, plus its live children's
// (the backends), from /proc. 0 when it cannot be read.
func serverCPU(dir string) time.Duration {
	raw, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid := strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])
	ticks := func(stat []string, fields ...int) (t int64) {
		for _, f := range fields {
			v, _ := strconv.ParseInt(stat[f], 10, 64)
			t += v
		}
		return t
	}
	var total int64
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat := procStat(e.Name())
		if stat == nil {
			continue
		}
		switch {
		case e.Name() == pid: // utime stime cutime cstime
			total += ticks(stat, 11, 12, 13, 14)
		case stat[1] == pid: // a backend: utime stime
			total += ticks(stat, 11, 12)
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// procStat returns the fields of /proc/pid/stat after the command name
// (field 0 is the state, 1 the parent pid), or nil.
func procStat(pid string) []string {
	if _, err := strconv.Atoi(pid); err != nil {
		return nil
	}
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil
	}
	return f
}
