package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/examples"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

func (a *app) demoCommand() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system once: sign and install packs, run tasks, replay, verify evidence",
		Long: `In a temporary home (or --home), generate a signing key, pack, sign and install the
bundled example packs, trust the key for their namespace, start the dispatcher in-process,
enqueue tasks that exercise skills, memory and an adapter (a local script), let the pack's
sensor run on its one-second schedule (its SensorEvents are recorded, deduped, and turned
into a task), wait for every task, replay every recorded attempt, verify the evidence chain,
and print a report.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			// A fresh home unless --home names one, which must be new or
			// empty: the demo writes its own trust policy and packs.
			if cmd.Flags().Changed("home") {
				if entries, err := os.ReadDir(a.home); err == nil && len(entries) > 0 {
					return usageError("demo needs a new or empty --home; %s is not empty", a.home)
				}
			} else {
				dir, err := os.MkdirTemp("", "packrun-demo-")
				if err != nil {
					return err
				}
				a.home = dir
				if !keep {
					defer os.RemoveAll(dir)
				}
			}
			return a.demo(ctx, keep)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary home afterwards (to explore it with --home)")
	return cmd
}

func (a *app) demo(ctx context.Context, keep bool) error {
	w := a.stdout
	start := time.Now()
	fmt.Fprintf(w, "packrun demo (home %s): keys, packs, tasks, a sensor, messages, replay, evidence\n", a.home)
	// Each step is printed as it is done, with the seconds since the
	// start, so that no stretch of the demo is silent.
	step := func(format string, args ...any) {
		fmt.Fprintf(w, "  · %4.1fs  "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}

	// 1. A key, the packs, signatures, trust, install.
	work, err := os.MkdirTemp("", "packrun-demo-src-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	key := filepath.Join(work, "demo")
	if err := registry.GenerateKey(key); err != nil {
		return err
	}
	signer, err := registry.LoadPrivateKey(key + ".key")
	if err != nil {
		return err
	}
	pub, _ := os.ReadFile(key + ".pub")
	policy := registry.NewPolicy()
	if err := policy.AddKey("demo", pub, []string{"local.*"}); err != nil {
		return err
	}
	if err := os.MkdirAll(a.home, 0o700); err != nil {
		return err
	}
	if err := policy.Save(a.trustPath("")); err != nil {
		return err
	}
	step("generated an ECDSA P-256 key and trusted it for local.*")
	// 2. An adapter: a local script.
	adapters := `{"adapters":[{"adapter_id":"wordcount","kind":"script","command":"wc","extra_args":["-w"],"timeout_ms":5000,"env":{"PATH":"/usr/bin:/bin"}}]}`
	if err := os.WriteFile(filepath.Join(a.home, "adapters.json"), []byte(adapters), 0o644); err != nil {
		return err
	}
	h, err := a.open(ctx, readWrite, packrun.Config{PoolSize: 2, Workers: 2})
	if err != nil {
		return err
	}
	defer h.Close(context.Background())
	var installed []string
	step("opened the home; packing, signing and installing %d example packs (their modules compile as they install)", len(examples.DemoPacks()))
	for _, dir := range examples.DemoPacks() {
		src := filepath.Join(work, dir)
		sub, _ := fs.Sub(examples.Demo, dir)
		if err := os.CopyFS(src, sub); err != nil {
			return err
		}
		archive, err := packs.Pack(src)
		if err != nil {
			return err
		}
		arch, err := packs.Read(strings.NewReader(string(archive)), packs.DefaultLimits())
		if err != nil {
			return err
		}
		bundle, prov, err := registry.Sign(ctx, archive, arch.Manifest.Name, signer, registry.SignOptions{BuilderID: "local:packrun-demo", SourceDigest: arch.SourceDigest()})
		if err != nil {
			return err
		}
		p, _, err := h.Install(ctx, registry.Signed{Archive: archive, Bundle: bundle, Provenance: prov}, packrun.InstallOptions{Policy: policy})
		if err != nil {
			return err
		}
		installed = append(installed, p.Ref())
		step("packed, signed (Sigstore bundle + SLSA provenance), verified and installed %s", p.Ref())
	}
	step("configured the script adapter wordcount (wc -w)")

	// 3. The dispatcher, in-process.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	// The demo judges the dispatcher by its tasks (waitDemo fails when they
	// do not finish); Run's own answer to the cancel is not news.
	stopDispatcher := sync.OnceFunc(func() { stop(); <-done }) //nolint:errcheck // see above
	defer stopDispatcher()

	// 4. Work: skills through the queue, a sensor triggered directly.
	b := h.Store()
	var ids []string
	enqueue := func(taskType, payload string, priority int) error {
		t, err := h.Enqueue(ctx, host.TaskIntent{TaskType: taskType, Source: "demo", Priority: host.Priority(priority), Payload: json.RawMessage(payload)}, host.EnqueueOptions{})
		if err != nil {
			return err
		}
		ids = append(ids, t.TaskID)
		return nil
	}
	for _, t := range []struct {
		typ, payload string
		prio         int
	}{{"hello.c", `{"name":"Ada"}`, 5}, {"hello.c", `{"name":"Grace"}`, 5}, {"demo.count", `{"name":"ada"}`, 1}} {
		if err := enqueue(t.typ, t.payload, t.prio); err != nil {
			return err
		}
	}
	step("enqueued 3 tasks: hello.c ×2, demo.count")
	step("the sensor demo.sensor runs every second on its schedule %s", host.SensorScheduleName("demo.sensor"))
	// The counter again, to show memory persisting across attempts: one
	// at a time (two at once would race on the same key).
	for i := 0; i < 2; i++ {
		if err := waitSettled(ctx, b, ids[len(ids)-1]); err != nil {
			return err
		}
		if err := enqueue("demo.count", `{"name":"ada"}`, 1); err != nil {
			return err
		}
	}

	// 5. Wait until the sensor ran a few times, pause its schedule, and
	// wait for every task, including the one its events raised.
	tasks, sensorRuns, err := waitDemo(ctx, b, 3, step)
	if err != nil {
		return err
	}
	step("the sensor ran %d times; paused its schedule", sensorRuns)
	stopDispatcher()
	byStatus := map[host.TaskStatus]int{}
	byType := map[string]int{}
	for _, t := range tasks {
		byStatus[t.Status]++
		byType[t.TaskType]++
	}

	// 6. Replay every attempt; verify the evidence.
	step("replaying every recorded attempt from its trace, then verifying the evidence chain")
	sum, err := h.ReplayAll(ctx, packrun.ReplayFilter{}, packrun.ReplayOptions{}, nil)
	if err != nil {
		return err
	}
	if sum.CouldNotRun > 0 {
		return fmt.Errorf("replay: %d attempts could not run: %s", sum.CouldNotRun, strings.Join(sum.Errors, "; "))
	}
	identical, diverged := sum.Identical, sum.Diverged
	for _, v := range sum.Divergences {
		printVerdict(w, v)
	}
	chain, err := b.VerifyChain(ctx)
	if err != nil {
		return err
	}
	sensed, err := countSensed(ctx, b, "demo.sensor")
	if err != nil {
		return err
	}
	talk, err := demoMessages(ctx, b)
	if err != nil {
		return err
	}
	count, _ := b.Get(ctx, host.Scope{Tenant: "default", Namespace: "counters"}, "ada")
	summary, _ := b.Get(ctx, host.Scope{Tenant: "default", Namespace: "summaries"}, "last")

	// 7. The report.
	fmt.Fprintln(w)
	row := func(k, v string) { fmt.Fprintf(w, "%-10s %s\n", k, v) }
	row("packs", strings.Join(installed, ", ")+" (signed by key:demo, SLSA provenance by local:packrun-demo)")
	var types []string
	for _, t := range []string{"hello.c", "demo.count", host.SensorTaskType("demo.sensor"), "demo.summarize", host.SubscriberTaskType("demo.responder")} {
		types = append(types, fmt.Sprintf("%s ×%d", t, byType[t]))
	}
	row("tasks", fmt.Sprintf("%d completed, %d failed (%s; demo.summarize was raised by the sensor, message:demo.responder by its crisis messages)", byStatus[host.TaskCompleted], len(tasks)-byStatus[host.TaskCompleted], strings.Join(types, ", ")))
	row("sensor", fmt.Sprintf("demo.sensor ran %d times on its 1s schedule: %d events recorded, %d deduped; tasks created from them: %d", sensorRuns, sensed.recorded, sensed.deduped, sensed.tasks))
	row("messages", fmt.Sprintf("demo.sensor raised %d crisis.detection messages (seed 002, delivered crisis-first); demo.responder answered %d with seed-001 responses", talk.crises, talk.answered))
	if talk.crisis != nil && talk.answer != nil {
		row("", fmt.Sprintf("crisis   %s from %s → tasks %s", talk.crisis.MessageID, talk.crisis.Sender, deliveryTasks(talk.crisis)))
		row("", fmt.Sprintf("response %s from %s, replyTo %s, evidence: %d sources, confidence %s", talk.answer.MessageID, talk.answer.Sender,
			talk.answer.ReplyTo, talk.evidence, talk.confidence))
	}
	row("attempts", fmt.Sprintf("%d recorded (every task attempt, the sensor's runs included, with its full host-call trace)", sum.Total))
	memory := "counters/ada = ?"
	if count != nil {
		memory = "counters/ada = " + string(count.Value) + " (TTL 1h)"
	}
	if summary != nil {
		memory += ", summaries/last = " + string(summary.Value) + " (from the wordcount adapter)"
	}
	row("memory", memory)
	row("replay", fmt.Sprintf("%d identical, %d diverged", identical, diverged))
	if chain.OK {
		row("evidence", fmt.Sprintf("intact: %d events, %d attempts and %d messages hash-chained, head %.16s…", chain.Events, chain.Attempts, chain.Messages, chain.Head))
	} else {
		row("evidence", fmt.Sprintf("BROKEN at seq %d: %s", chain.Broken.Seq, brokenText(chain.Broken)))
	}
	row("time", time.Since(start).Round(time.Millisecond).String())
	if keep {
		fmt.Fprintf(w, "\nexplore it: packrun --home %s attempts list | tasks list | evidence verify | replay --all\n", a.home)
	}
	if diverged > 0 || !chain.OK || byStatus[host.TaskCompleted] != len(tasks) || sensed.tasks != 1 || sensed.deduped == 0 ||
		talk.crises == 0 || talk.answered != talk.crises {
		return withCode(exitFailed, fmt.Errorf("demo: not everything went as expected"))
	}
	return nil
}

// waitDemo waits until the demo sensor's scheduled runs completed at
// least runs times, pauses its schedule, then waits until every task is
// settled; it returns the tasks and how many sensor runs completed.
func waitDemo(ctx context.Context, b host.Backend, runs int, step func(string, ...any)) ([]*host.TaskRecord, int, error) {
	deadline := time.Now().Add(time.Minute)
	paused := false
	said := 0 // sensor runs reported
	for {
		tasks, err := b.ListTasks(ctx, host.TaskFilter{Limit: 1000})
		if err != nil {
			return nil, 0, err
		}
		pending, done := 0, 0
		for _, t := range tasks {
			if !t.Status.Terminal() {
				pending++
			} else if t.TaskType == host.SensorTaskType("demo.sensor") {
				done++
			}
		}
		for ; said < min(done, runs); said++ {
			step("sensor run %d of %d done; %d tasks finished, %d to go", said+1, runs, len(tasks)-pending, pending)
		}
		switch {
		case paused && pending == 0:
			return tasks, done, nil
		case !paused && done >= runs:
			off := false
			if _, err := b.UpdateSchedule(ctx, host.DefaultTenant, host.SensorScheduleName("demo.sensor"), host.ScheduleUpdate{Enabled: &off}); err != nil {
				return nil, 0, err
			}
			paused = true
			continue
		}
		if time.Now().After(deadline) {
			return nil, 0, fmt.Errorf("demo: %d tasks still not finished after a minute (%d sensor runs)", pending, done)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sensed counts what became of a sensor's events.
type sensed struct{ recorded, deduped, tasks int }

func countSensed(ctx context.Context, b host.Backend, sensorID string) (sensed, error) {
	var c sensed
	evs, err := b.ListSensorEvents(ctx, host.SensorEventFilter{SensorID: sensorID, Limit: 1000})
	if err != nil {
		return c, err
	}
	c.recorded = len(evs)
	for _, e := range evs {
		switch e.Status {
		case host.SensorDeduped:
			c.deduped++
		case host.SensorTaskCreated:
			c.tasks++
		}
	}
	return c, nil
}

// waitSettled waits (up to a minute) until task id is terminal.
func waitSettled(ctx context.Context, b host.Backend, id string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		t, err := b.Task(ctx, id)
		if err != nil {
			return err
		}
		if t.Status.Terminal() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: task %s still %s after a minute", id, t.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// demoTalk is what the demo's packs said on the bus.
type demoTalk struct {
	crises, answered int
	crisis, answer   *host.MessageRecord // the first crisis and its answer
	evidence         int
	confidence       string
}

// demoMessages reads the crisis messages the sensor raised and the
// responses that answered them.
func demoMessages(ctx context.Context, b host.Backend) (*demoTalk, error) {
	t := &demoTalk{}
	page, err := b.ListMessages(ctx, host.MessageQuery{Topic: "crisis.detection", Limit: host.MaxMessageLimit})
	if err != nil {
		return nil, err
	}
	t.crises = len(page.Messages)
	for i := range page.Messages {
		m := &page.Messages[i]
		replies, err := b.ListMessages(ctx, host.MessageQuery{ReplyTo: m.MessageID, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(replies.Messages) == 0 {
			continue
		}
		t.answered++
		if t.answer == nil {
			t.crisis, t.answer = m, &replies.Messages[0]
		}
	}
	if t.answer != nil {
		var doc struct {
			Evidence struct {
				Sources    []json.RawMessage `json:"sources"`
				Confidence json.Number       `json:"confidence"`
			} `json:"evidence"`
		}
		if err := json.Unmarshal(t.answer.Document, &doc); err != nil {
			return nil, err
		}
		t.evidence, t.confidence = len(doc.Evidence.Sources), doc.Evidence.Confidence.String()
	}
	return t, nil
}

// deliveryTasks names the tasks a message created, with their subscribers.
func deliveryTasks(m *host.MessageRecord) string {
	var out []string
	for _, d := range m.Deliveries {
		out = append(out, d.TaskID+" ("+d.Subscriber+", "+string(d.TaskStatus)+")")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
