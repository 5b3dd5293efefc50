package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/testing/pgtest"
	"github.com/packrun/packrun/internal/testing/runstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A Host on PostgreSQL (Config.Store a postgres:// URL) does the main job
// as on SQLite: a signed pack installed, a task run by the dispatcher, its
// attempt replayed identically, the evidence chain verified; a second
// Host on the same database (another node, another home with the same
// secret key) sees the pack and the task.
func TestHostOnPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	f := openPostgresHome(t, dsn)
	h, home, k := f.Host, f.home, f.key
	t.Cleanup(func() { h.Close(ctx) })
	f.install(t, hello("1.0.0"))
	if err := h.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "greet"}, &host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "greet"}, Pack: "local.hello.c", Node: "example.hello"}); err != nil {
		t.Fatal(err)
	}
	task, err := h.Enqueue(ctx, host.TaskIntent{TaskType: "greet", Source: "test", Payload: json.RawMessage(`{"name":"pg"}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := h.Store().Task(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == host.TaskCompleted {
			break
		}
		if got.Status.Terminal() || time.Now().After(deadline) {
			t.Fatalf("task %s: %s (%s)", task.TaskID, got.Status, got.LastError)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	sum, err := h.ReplayAll(ctx, ReplayFilter{}, ReplayOptions{}, nil)
	if err != nil || sum.Total != 1 || sum.Identical != 1 {
		t.Fatalf("replay: %+v %v", sum, err)
	}
	rep, err := h.VerifyChain(ctx, nil)
	if err != nil || !rep.OK || rep.Attempts != 1 {
		t.Fatalf("chain: %+v %v", rep, err)
	}

	// Another node: its own home, the same secret key.
	home2 := filepath.Join(t.TempDir(), "home2")
	savePolicy(t, home2, trustKey(t, k, "local.*"))
	if err := os.WriteFile(filepath.Join(home2, "secret.key"), mustRead(t, filepath.Join(home, "secret.key")), 0o600); err != nil {
		t.Fatal(err)
	}
	h2, err := Open(ctx, home2, Config{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close(ctx)
	if refs := refs(t, h2); len(refs) != 1 || refs[0] != "local.hello.c@1.0.0" {
		t.Fatalf("the other node's packs: %v", refs)
	}
	if got, err := h2.Store().Task(ctx, task.TaskID); err != nil || got.Status != host.TaskCompleted {
		t.Fatalf("the other node's view of the task: %+v %v", got, err)
	}

	// Each node anchors the chain in its own home (evidence-head.json),
	// signed with its own host key: the first the head it committed, the
	// second, which committed nothing, the head it found when it opened.
	rep2, err := h2.VerifyChain(ctx, nil)
	if err != nil || !rep2.OK || rep2.Checkpoint == nil || rep2.Checkpoint.Seq != rep2.HeadSeq {
		t.Fatalf("the other node's chain: %+v %v", rep2, err)
	}
	var cp1 *evidence.Checkpoint
	for range 500 {
		if cp1, err = evidence.ReadCheckpoint(filepath.Join(home, "evidence-head.json")); err == nil && cp1.Seq == rep.HeadSeq {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cp2, err2 := evidence.ReadCheckpoint(filepath.Join(home2, "evidence-head.json"))
	if err != nil || err2 != nil || cp1.Seq != rep.HeadSeq || cp1.Hash != rep.Head || cp1.PublicKey == cp2.PublicKey {
		t.Fatalf("checkpoints %+v %v, %+v %v (head %d)", cp1, err, cp2, err2, rep.HeadSeq)
	}
}

// A store that is neither empty nor a postgres:// URL is refused naming
// what is wanted, with any password left out.
func TestOpenRefusesAnUnknownStore(t *testing.T) {
	_, err := Open(ctx, t.TempDir(), Config{Store: "mysql://root:hunter2@db/x"})
	if err == nil || !errors.Is(err, ErrConfig) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("got %v", err)
	}
}

// An openwop run is held by the node executing it: another node's
// dispatcher, reclaiming every half lease, leaves it alone while its
// lease is renewed, and continues it once that node closes (its lease let
// go), exactly once, after a run.resumed event.
func TestRunLeasesAcrossNodes(t *testing.T) {
	dsn := pgtest.DSN(t)
	const lease = 2 * time.Second
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*"))
	a, err := Open(ctx, home, Config{Store: dsn, LeaseTTL: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(ctx) })
	f := &fixture{Host: a, home: home, key: k}
	f.install(t, hello("1.0.0"))
	f.install(t, laterPack(t, "1.0.0", true))
	w := &host.OpenwopWorkflow{WorkflowID: "two", Nodes: []host.OpenwopNode{{ID: "greet", TypeID: "example.hello"}, {ID: "later", TypeID: "example.later"}}}
	if err := a.PutOpenwopWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}

	home2 := filepath.Join(t.TempDir(), "home2")
	savePolicy(t, home2, trustKey(t, k, "local.*"))
	if err := os.WriteFile(filepath.Join(home2, "secret.key"), mustRead(t, filepath.Join(home, "secret.key")), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, home2, Config{Store: dsn, LeaseTTL: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(ctx) })
	runHost(t, b)

	r, err := a.StartRun(ctx, host.DefaultTenant, "two", json.RawMessage(`{"name":"ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	runstest.Wait(t, a.store, r.RunID, func(_ *host.Run, evs []host.RunEvent) bool {
		return runstest.Count(evs, host.RunEventNodeStarted, "later") == 1
	})
	// Past two leases and four of b's reclaims: the run is still a's.
	time.Sleep(2*lease + lease/2)
	got, err := b.store.Run(ctx, host.DefaultTenant, r.RunID)
	if err != nil || got.Holder != a.cfg.RunnerID || got.Status != host.RunRunning {
		t.Fatalf("run while its node renews its lease: %+v %v (a is %s)", got, err, a.cfg.RunnerID)
	}
	if evs, _ := b.store.RunEvents(ctx, host.DefaultTenant, r.RunID); runstest.Count(evs, host.RunEventResumed, "later") != 0 ||
		runstest.Count(evs, host.RunEventNodeStarted, "later") != 1 {
		t.Fatalf("another node continued a run its node still executes: %s", runstest.Types(evs))
	}

	f.install(t, laterPack(t, "1.0.1", false)) // what b runs: this one completes
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got, evs := runstest.Wait(t, b.store, r.RunID, func(r *host.Run, _ []host.RunEvent) bool { return host.RunTerminal(r.Status) })
	if got.Status != host.RunCompleted || got.Holder != b.cfg.RunnerID {
		t.Fatalf("run %s held by %s (b is %s): %+v, events %s", got.Status, got.Holder, b.cfg.RunnerID, got.Error, runstest.Types(evs))
	}
	if runstest.Count(evs, host.RunEventResumed, "later") != 1 || runstest.Count(evs, host.RunEventNodeStarted, "later") != 2 ||
		runstest.Count(evs, host.RunEventNodeDone, "later") != 1 || runstest.Count(evs, host.RunEventNodeStarted, "greet") != 1 {
		t.Fatalf("continued run's events: %s", runstest.Types(evs))
	}
}

// openPostgresHome opens a new home, trusting the test key for local.*,
// on the PostgreSQL database dsn; the caller closes it.
func openPostgresHome(t *testing.T, dsn string) *fixture {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	savePolicy(t, home, trustKey(t, k, "local.*"))
	h, err := Open(ctx, home, Config{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{Host: h, home: home, key: k}
}

// A PostgreSQL node whose home lost its host key or checkpoint is refused
// as a SQLite home is (host.ErrUnanchored, naming the file), and the
// refused open makes no new key; Reanchor brings it back.
func TestPostgresNodeRefusesALostAnchor(t *testing.T) {
	dsn := pgtest.DSN(t)
	f := openPostgresHome(t, dsn)
	h, home := f.Host, f.home
	f.install(t, hello("1.0.0"))
	if _, err := h.Invoke(ctx, "local.hello.c", InvokeRequest{Input: json.RawMessage(`{"name":"pg"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, says string }{{"host.key", "is missing"}, {"evidence-head.json", "is missing"}} {
		path := filepath.Join(home, c.file)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, home, Config{Store: dsn}); !errors.Is(err, host.ErrUnanchored) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("open without %s: %v", c.file, err)
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the refused open made %s: %v", c.file, err)
		}
		if _, err := Reanchor(ctx, home, Config{Store: dsn}, "lost "+c.file); err != nil {
			t.Fatal(err)
		}
		h, err := Open(ctx, home, Config{Store: dsn})
		if err != nil {
			t.Fatalf("after reanchor: %v", err)
		}
		if rep, err := h.VerifyChain(ctx, nil); err != nil || !rep.OK || rep.Checkpoint == nil {
			t.Fatalf("verify after reanchor: %+v %v", rep, err)
		}
		h.Close(ctx)
	}
}
