package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/message/messagetest"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

const defaultTenant = "default"

// installHello signs examples/hello-c with a fresh key, trusts the key
// for local.* in home's trust policy, and installs it.
func installHello(t *testing.T, ctx context.Context, h *packrun.Host, home string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	policy := registry.NewPolicy()
	if err := policy.AddKey("test", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), []string{"local.*"}); err != nil {
		t.Fatal(err)
	}
	if err := policy.Save(filepath.Join(home, "trust.json")); err != nil {
		t.Fatal(err)
	}
	archive, err := packs.Pack("../../examples/hello-c")
	if err != nil {
		t.Fatal(err)
	}
	bundle, prov, err := registry.Sign(ctx, archive, "local.hello.c", priv, registry.SignOptions{
		BuilderID: "https://ci.example/builders/packs@v1", SourceDigest: strings.Repeat("0123456789abcdef", 4)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.Install(ctx, registry.Signed{Archive: archive, Bundle: bundle, Provenance: prov}, packrun.InstallOptions{}); err != nil {
		t.Fatalf("install the C hello pack: %v", err)
	}
}

// completedTask enqueues a hello.c task and runs the dispatcher until it
// has completed.
func completedTask(t *testing.T, ctx context.Context, h *packrun.Host) *host.TaskRecord {
	t.Helper()
	task, err := h.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "operator", Subject: "greet ada",
		Payload: json.RawMessage(`{"name":"ada"}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("dispatcher: %v", err)
		}
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := h.Store().Task(ctx, task.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			if got.Status != host.TaskCompleted {
				t.Fatalf("task %s: %s (%s)", got.TaskID, got.Status, got.LastError)
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s after 60 s", got.TaskID, got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsoleInChromium drives the console, served by Host.Handler as
// packrun serve serves it, in a real headless Chromium:
// log in with a token, see the completed task, open its attempt, replay
// it and read "identical".
func TestConsoleInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("this test needs a headless browser: install Debian's chromium package (apt-get install chromium; .ci/run does): %v", err)
	}
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	h, err := packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	installHello(t, ctx, h, home)
	task := completedTask(t, ctx, h)
	// A seed 000 envelope on the bus, for the Messages pages.
	msgID := messagetest.ULID(1)
	if _, err := h.PublishMessage(ctx, defaultTenant, "", "application/json; profile=agent-envelope", messagetest.Envelope(1, "arc", "query", messagetest.ZeroHash)); err != nil {
		t.Fatal(err)
	}

	// The console as packrun serve mounts it (Host.Handler), behind a
	// real token of the tenant the task belongs to.
	token, _, err := h.CreateToken(ctx, packrun.TokenSpec{Tenant: defaultTenant, Name: "operator",
		Scopes: []packrun.Scope{auth.ScopeTasksRead, auth.ScopeTasksWrite, auth.ScopeEvidenceRead, auth.ScopeMessagesRead}})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 120*time.Second)
	defer cancelTimeout()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return strings.TrimSpace(s)
	}

	do("open the console", chromedp.Navigate(srv.URL+"/console/"), chromedp.WaitVisible(chromedp.ID("token")))
	if loc, err := chromedp.Run(bctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/console/login") {
		t.Errorf("/console/ without a cookie went to %s (%v)", loc, err)
	}
	do("log in", chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("tasks")))
	if tasks, tenant := text("tasks"), text("tenant"); !strings.Contains(tasks, task.TaskID) || !strings.Contains(tasks, "completed") || tenant != defaultTenant {
		t.Fatalf("tasks page (tenant %q) does not show completed task %s:\n%s", tenant, task.TaskID, tasks)
	}
	do("open the task", chromedp.Click(chromedp.CSS(`a[href="/console/tasks/`+task.TaskID+`"]`)), chromedp.WaitVisible(chromedp.ID("task-status")))
	if st := text("task-status"); st != "completed" {
		t.Errorf("task page status %q", st)
	}
	do("open the attempt", chromedp.Click(chromedp.CSS("a.attempt-link")), chromedp.WaitVisible(chromedp.ID("replay")))
	if out := text("field-output"); !strings.Contains(out, "Hello, ada!") {
		t.Errorf("attempt output %q", out)
	}
	do("replay", chromedp.Click(chromedp.ID("replay")), chromedp.WaitVisible(chromedp.ID("verdict")))
	if v := text("verdict"); v != "identical" {
		t.Fatalf("replay verdict %q, want identical", v)
	}
	do("open the messages", chromedp.Click(chromedp.CSS(`a[href="/console/messages"]`)), chromedp.WaitVisible(chromedp.ID("messages")))
	do("open the message", chromedp.Click(chromedp.CSS("a.message-link")), chromedp.WaitVisible(chromedp.ID("document")))
	if doc := text("document"); !strings.Contains(doc, msgID) || !strings.Contains(doc, `"intent": "query"`) {
		t.Errorf("message document:\n%s", doc)
	}
	do("show it as seed 001", chromedp.SetValue(chromedp.ID("format"), "agent-message"), chromedp.Click(chromedp.ID("show-format")),
		chromedp.WaitVisible(chromedp.ID("lost")))
	if lost, doc := text("lost"), text("document"); !strings.Contains(lost, "prev_truth_state") || !strings.Contains(doc, `"type": "query"`) {
		t.Errorf("as agent-message: lost %q, document:\n%s", lost, doc)
	}
	do("back to the messages", chromedp.Navigate(srv.URL+"/console/messages"), chromedp.WaitVisible(chromedp.ID("messages")))
	if c := text("count-messages"); c != "1" {
		t.Errorf("messages count %q, want 1", c)
	}
	live(t, bctx, do, text, h, srv.URL, task)
}

// live drives the live console: counts, paging, a task created after the
// page loaded appearing without a reload, actions only where they can
// succeed, and the schedules, workflows and events pages.
func live(t *testing.T, bctx context.Context, do func(string, ...chromedp.Action[chromedp.Void]), text func(string) string,
	h *packrun.Host, base string, done *host.TaskRecord) {
	t.Helper()
	ctx := context.Background()
	// The message above made no task (nothing subscribes): one task, completed.
	do("open the tasks", chromedp.Navigate(base+"/console/tasks"), chromedp.WaitVisible(chromedp.ID("tasks")))
	if all, completed, pending := text("count-all"), text("count-completed"), text("count-pending"); all != "1" || completed != "1" || pending != "0" {
		t.Fatalf("counts: all %s, completed %s, pending %s", all, completed, pending)
	}
	// A task created after the page loaded shows up, with its count,
	// without the page being loaded again (the marker survives).
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.packrunMarker = 42`)); err != nil {
		t.Fatal(err)
	}
	fresh, err := h.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "operator", Subject: "greet bob",
		Payload: json.RawMessage(`{"name":"bob"}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	do("see the new task live", chromedp.WaitVisible(chromedp.CSS(`#tasks a[href="/console/tasks/`+fresh.TaskID+`"]`)))
	if marker, err := chromedp.Run(bctx, chromedp.Evaluate[int](`window.packrunMarker || 0`)); err != nil || marker != 42 {
		t.Fatalf("the page was reloaded (marker %d, %v)", marker, err)
	}
	if pending, all, note := text("count-pending"), text("count-all"), text("live"); pending != "1" || all != "2" || !strings.HasPrefix(note, "Live: updated") {
		t.Errorf("after the refresh: pending %s, all %s, note %q", pending, all, note)
	}
	// Paging: one task a page, newest first.
	do("first page", chromedp.Navigate(base+"/console/tasks?limit=1"), chromedp.WaitVisible(chromedp.ID("next")))
	if l := text("tasks"); !strings.Contains(l, fresh.TaskID) || strings.Contains(l, done.TaskID) {
		t.Errorf("page 1:\n%s", l)
	}
	do("next page", chromedp.Click(chromedp.ID("next")), chromedp.WaitVisible(chromedp.ID("prev")))
	if l, p := text("tasks"), text("page"); !strings.Contains(l, done.TaskID) || strings.Contains(l, fresh.TaskID) || p != "2" {
		t.Errorf("page %s:\n%s", p, l)
	}
	absent := func(what string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#`+id+`").length`)); err != nil || n != 0 {
				t.Errorf("%s: #%s offered (%d, %v)", what, id, n, err)
			}
		}
	}
	do("open the pending task", chromedp.Navigate(base+"/console/tasks/"+fresh.TaskID), chromedp.WaitVisible(chromedp.ID("cancel")))
	absent("pending task", "retry", "resume")
	do("open the completed task", chromedp.Navigate(base+"/console/tasks/"+done.TaskID), chromedp.WaitVisible(chromedp.ID("task-status")))
	absent("completed task", "cancel", "retry", "resume")

	if _, err := h.Store().CreateSchedule(ctx, host.ScheduleSpec{Name: "hourly-hello", IntervalSeconds: 3600,
		Task: host.TaskIntent{TaskType: "hello.c", Payload: json.RawMessage(`{"name":"clock"}`)}}); err != nil {
		t.Fatal(err)
	}
	do("open the schedules", chromedp.Navigate(base+"/console/schedules"), chromedp.WaitVisible(chromedp.ID("schedules")))
	if l := text("schedules"); !strings.Contains(l, "hourly-hello") || !strings.Contains(l, "3600 s") {
		t.Errorf("schedules:\n%s", l)
	}
	rec, _, err := h.Store().StartWorkflow(ctx, host.WorkflowStart{WorkflowType: host.GoalLoop, InstanceKey: "console",
		Context: json.RawMessage(`{"goal":"show the console"}`)})
	if err != nil {
		t.Fatal(err)
	}
	do("open the workflows", chromedp.Navigate(base+"/console/workflows"), chromedp.WaitVisible(chromedp.ID("workflows")))
	do("open the record", chromedp.Click(chromedp.CSS(`a[href="/console/workflows/`+rec.WorkflowID+`"]`)), chromedp.WaitVisible(chromedp.ID("definition")))
	if st, cur, def := text("workflow-status"), text("workflow-current"), text("definition"); st != "active" || cur != rec.CurrentState || !strings.Contains(def, "(current)") {
		t.Errorf("record: status %q, state %q, definition:\n%s", st, cur, def)
	}
	do("open the events", chromedp.Navigate(base+"/console/events"), chromedp.WaitVisible(chromedp.ID("events")))
	if l := text("events"); !strings.Contains(l, "task_enqueued") || !strings.Contains(l, "workflow_created") {
		t.Errorf("events:\n%s", l)
	}
	do("filter the events", chromedp.SetValue(chromedp.ID("type"), "workflow_created"), chromedp.Submit(chromedp.ID("type")),
		chromedp.WaitVisible(chromedp.CSS(`#events`)))
	types, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("#events .event-type")).map(e => e.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(types) == 0 {
		t.Errorf("no workflow_created event listed")
	}
	for _, ty := range types {
		if ty != "workflow_created" {
			t.Errorf("filtered events list a %s", ty)
		}
	}
}
