package sqlite

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// claimOne claims a task, "runs" it for work, records its attempt and
// finishes it. It returns "" when the queue is empty.
func claimOne(s *Store, runner string, work time.Duration) (string, error) {
	task, err := s.Claim(ctx, runner, time.Time{})
	if errors.Is(err, host.ErrEmpty) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	time.Sleep(work)
	a := &host.Attempt{TaskID: task.TaskID, Attempt: task.AttemptCount, Outcome: "completed", RunnerID: runner}
	if err := s.RecordAttempt(ctx, a); err != nil {
		return "", err
	}
	if _, err := s.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		return "", err
	}
	return task.TaskID, nil
}

func checkClaimedOnce(t *testing.T, enqueued map[string]bool, claims [][]string) {
	t.Helper()
	seen := map[string]int{}
	for i, c := range claims {
		for _, id := range c {
			if !enqueued[id] {
				t.Fatalf("claimer %d claimed unknown task %s", i, id)
			}
			if prev, dup := seen[id]; dup {
				t.Fatalf("task %s claimed by claimers %d and %d", id, prev, i)
			}
			seen[id] = i
		}
	}
	if len(seen) != len(enqueued) {
		t.Fatalf("%d of %d tasks claimed", len(seen), len(enqueued))
	}
	for i, c := range claims {
		t.Logf("claimer %d: %d tasks", i, len(c))
	}
}

func enqueueN(t *testing.T, s *Store, n int) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		ids[mustEnqueue(t, s, intent("work", host.Priority(i%3)), host.EnqueueOptions{}).TaskID] = true
	}
	return ids
}

func TestConcurrentClaimersSeparateStores(t *testing.T) {
	f := newFixture(t, Options{Now: time.Now})
	const claimers, rounds = 4, 75
	enqueued := enqueueN(t, f.Store, claimers*rounds)
	stores := make([]*Store, claimers)
	for i := range stores {
		stores[i] = f.another(t)
	}
	// In every round all claimers claim at the same moment, each through
	// its own Store (connection pool and writer): each must get a
	// different task.
	claims := make([][]string, claimers)
	for range rounds {
		var wg sync.WaitGroup
		errs := make([]error, claimers)
		for i, s := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var id string
				id, errs[i] = claimOne(s, fmt.Sprintf("runner-%d", i), 0)
				if id != "" {
					claims[i] = append(claims[i], id)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	checkClaimedOnce(t, enqueued, claims)
	for i, c := range claims {
		if len(c) != rounds {
			t.Fatalf("claimer %d got %d tasks in %d rounds", i, len(c), rounds)
		}
	}
	if rep, _ := f.VerifyChain(ctx); !rep.OK {
		t.Fatalf("chain broken by concurrent writers: %+v", rep.Broken)
	}
}

// TestHelperClaimProcess is the child of TestConcurrentClaimProcesses.
func TestHelperClaimProcess(t *testing.T) {
	path := os.Getenv("PACKRUN_HOST_CLAIM_DB")
	if path == "" {
		t.Skip("helper process")
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Claim until the queue is empty, with 2 ms of "work" per task so that
	// the processes overlap.
	for {
		id, err := claimOne(s, "proc-"+fmt.Sprint(os.Getpid()), 2*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			return
		}
		fmt.Println("CLAIMED", id)
	}
}

func TestConcurrentClaimProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	f := newFixture(t, Options{Now: time.Now})
	enqueued := enqueueN(t, f.Store, 300)
	const procs = 3
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range procs {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperClaimProcess$", "-test.count=1")
		cmds[i].Env = append(os.Environ(), "PACKRUN_HOST_CLAIM_DB="+f.path)
		outs[i] = new(bytes.Buffer)
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	claims := make([][]string, procs)
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
		sc := bufio.NewScanner(outs[i])
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "CLAIMED "); ok {
				claims[i] = append(claims[i], id)
			}
		}
	}
	checkClaimedOnce(t, enqueued, claims)
	if rep, _ := f.VerifyChain(ctx); !rep.OK {
		t.Fatalf("chain broken by concurrent processes: %+v", rep.Broken)
	}
}

func TestConcurrentEnqueue(t *testing.T) {
	f := newFixture(t, Options{})
	const n = 1000
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := intent("bulk", nil)
			in.Payload = []byte(fmt.Sprintf(`{"i":%d}`, i))
			rec, err := f.Enqueue(ctx, in, host.EnqueueOptions{})
			if err == nil {
				ids[i] = rec.TaskID
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	uniq := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		uniq[ids[i]] = true
	}
	var count, events int
	f.db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&count)
	f.db.QueryRow(`SELECT COUNT(*) FROM runtime_events WHERE type = 'task_enqueued'`).Scan(&events)
	if len(uniq) != n || count != n || events != n {
		t.Fatalf("%d ids, %d rows, %d events; want %d", len(uniq), count, events, n)
	}
	var payloads int
	f.db.QueryRow(`SELECT COUNT(DISTINCT json_extract(payload, '$.i')) FROM tasks`).Scan(&payloads)
	if payloads != n {
		t.Fatalf("%d distinct payloads", payloads)
	}
	if rep, _ := f.VerifyChain(ctx); !rep.OK || rep.Events != n {
		t.Fatalf("chain: %+v", rep)
	}
}

// TestCloseLosesNothing closes the store while writers are busy: every
// write that was acknowledged is there after reopening, every write that
// failed is not.
func TestCloseLosesNothing(t *testing.T) {
	path := newFixture(t, Options{}).path
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]bool{}
	failed := 0
	var wg sync.WaitGroup
	start := make(chan struct{})
	enough := make(chan struct{}) // closed after 200 acknowledgements
	var once sync.Once
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; ; i++ {
				in := intent("close", nil)
				in.Subject = fmt.Sprintf("w%d-%d", w, i)
				rec, err := s.Enqueue(ctx, in, host.EnqueueOptions{})
				mu.Lock()
				if err != nil {
					failed++
					mu.Unlock()
					if !errors.Is(err, host.ErrClosed) {
						t.Errorf("unexpected error: %v", err)
					}
					return
				}
				acked[rec.TaskID] = true
				if len(acked) >= 200 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	close(start)
	<-enough // Close while the writers are still going
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	_, err = s.Enqueue(ctx, intent("late", nil), host.EnqueueOptions{})
	wantErr(t, err, host.ErrClosed)
	if _, err := s.Get(ctx, host.Scope{Tenant: "t", Namespace: "n"}, "k"); err == nil {
		t.Fatal("read after Close")
	}
	if _, err := s.Task(ctx, "x"); err == nil {
		t.Fatal("read after Close")
	}

	s2, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	rows, err := s2.db.Query(`SELECT task_id FROM tasks`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		stored[id] = true
	}
	rows.Close()
	for id := range acked {
		if !stored[id] {
			t.Fatalf("acknowledged task %s lost", id)
		}
	}
	if len(stored) != len(acked) {
		t.Fatalf("%d stored, %d acknowledged", len(stored), len(acked))
	}
	t.Logf("%d acknowledged before Close, %d refused after", len(acked), failed)
}

// TestBatchIsolation: an operation that fails inside a batch does not undo
// the others committed with it.
func TestBatchIsolation(t *testing.T) {
	f := newFixture(t, Options{BatchDelay: 20 * time.Millisecond})
	var wg sync.WaitGroup
	results := make([]error, 40)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := intent("iso", nil)
			if i%2 == 1 {
				in.Payload = []byte(`{"i":` + itoa(int64(i)) + `}`)
				// Fails inside the writer: the attempt is not recorded.
				_, results[i] = f.Finish(ctx, "task-missing", host.FinishInput{AttemptID: "a", Outcome: okOutcome()})
				return
			}
			_, results[i] = f.Enqueue(ctx, in, host.EnqueueOptions{})
		}()
	}
	wg.Wait()
	for i, err := range results {
		if (err != nil) != (i%2 == 1) {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	var n int
	f.db.QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&n)
	if n != 20 {
		t.Fatalf("%d tasks", n)
	}
	if rep, _ := f.VerifyChain(ctx); !rep.OK {
		t.Fatal(rep.Broken)
	}
}

// TestCanceledContext: a context that ends before the operation runs
// leaves nothing behind.
func TestCanceledContext(t *testing.T) {
	f := newFixture(t, Options{})
	c, cancel := contextWithCancel()
	cancel()
	_, err := f.Enqueue(c, intent("x", nil), host.EnqueueOptions{})
	if !errors.Is(err, errCanceled) {
		t.Fatal(err)
	}
	if l, _ := f.ListTasks(ctx, host.TaskFilter{}); len(l) != 0 {
		t.Fatal("stored")
	}
}

// TestBatchRedo: an operation that fails (or panics) after writing is
// undone without a trace, and the operations batched with it are run
// again and committed; one that fails before writing costs no re-run.
func TestBatchRedo(t *testing.T) {
	// Operations arriving less than BatchDelay apart share a batch.
	f := newFixture(t, Options{BatchDelay: 200 * time.Millisecond})
	var runs atomic.Int64 // runs of the first operation
	var wg sync.WaitGroup
	start := make(chan struct{})
	submit := func(fn func(tx *wtx) error) *error {
		var err error
		wg.Add(1)
		go func(start chan struct{}) {
			defer wg.Done()
			<-start
			err = f.w.do(ctx, fn)
		}(start)
		return &err
	}
	task := func(name string) *host.TaskRecord {
		in := intent(name, nil)
		rec, err := storecore.NewTask("test", &in, 0, f.clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	first := task("first")
	errFirst := submit(func(tx *wtx) error {
		runs.Add(1)
		return f.insertTask(tx, first, "")
	})
	// Give the first operation the head of the batch.
	close(start)
	time.Sleep(10 * time.Millisecond)
	start = make(chan struct{})
	failing := task("failing")
	errFailing := submit(func(tx *wtx) error {
		if err := f.insertTask(tx, failing, ""); err != nil {
			return err
		}
		return errors.New("boom after writing")
	})
	panicking := task("panicking")
	errPanicking := submit(func(tx *wtx) error {
		if err := f.insertTask(tx, panicking, ""); err != nil {
			return err
		}
		panic("boom")
	})
	errClean := submit(func(tx *wtx) error { return errors.New("refused before writing") })
	var others []*error
	for range 10 {
		others = append(others, submit(func(tx *wtx) error { return f.insertTask(tx, task("other"), "") }))
	}
	close(start)
	wg.Wait()

	if *errFirst != nil || *errFailing == nil || *errPanicking == nil || *errClean == nil {
		t.Fatalf("first %v, failing %v, panicking %v, clean %v", *errFirst, *errFailing, *errPanicking, *errClean)
	}
	for _, err := range others {
		if *err != nil {
			t.Fatal(*err)
		}
	}
	if runs.Load() < 2 {
		t.Errorf("the first operation ran %d times; it was batched with failures and should have been run again", runs.Load())
	}
	all, err := f.ListTasks(ctx, host.TaskFilter{})
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, r := range all {
		types[r.TaskType]++
	}
	if types["first"] != 1 || types["other"] != 10 || types["failing"] != 0 || types["panicking"] != 0 {
		t.Fatalf("stored %v", types)
	}
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK || rep.Events != 11 {
		t.Fatalf("chain %v %+v", err, rep)
	}
}

// TestFailedBatchNotSynced: a batch whose every operation failed committed
// nothing, and is answered without a WAL sync (an idle dispatcher's claims
// polled a sync, with its disk cache flush, each); a batch that wrote is
// answered only after one.
func TestFailedBatchNotSynced(t *testing.T) {
	f := newFixture(t, Options{})
	before := f.w.syncs.Load()
	for range 5 {
		_, err := f.Claim(ctx, "runner", time.Time{})
		wantErr(t, err, host.ErrEmpty)
		// Fails after writing: rolled back, nothing committed either.
		_, err = f.Finish(ctx, "task-missing", host.FinishInput{AttemptID: "a", Outcome: okOutcome()})
		if err == nil {
			t.Fatal("Finish of a missing task succeeded")
		}
	}
	if n := f.w.syncs.Load() - before; n != 0 {
		t.Fatalf("%d WAL syncs for batches that committed nothing", n)
	}
	if _, err := f.Enqueue(ctx, intent("sync", nil), host.EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := f.w.syncs.Load() - before; n != 1 {
		t.Fatalf("%d WAL syncs after one enqueue, want 1", n)
	}
}
