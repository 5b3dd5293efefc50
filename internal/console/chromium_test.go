package console_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
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
	"github.com/packrun/packrun/internal/console"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

// hostBackend is console.Backend over a *packrun.Host. Tasks have no
// tenant yet: every task is the "default" tenant's.
type hostBackend struct{ h *packrun.Host }

var _ console.Backend = hostBackend{}

const defaultTenant = "default"

func notFound(what, id string) error {
	return host.Errorf(what, id, host.ErrNotFound, "no %s %s", what, id)
}

func (b hostBackend) Packs(ctx context.Context) ([]console.PackView, error) {
	ps, err := b.h.Packs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]console.PackView, 0, len(ps))
	for _, p := range ps {
		rec, m, err := b.h.Pack(ctx, p.Ref())
		if err != nil {
			return nil, err
		}
		out = append(out, console.PackView{Pack: rec, Manifest: m})
	}
	return out, nil
}

func (b hostBackend) Tasks(ctx context.Context, tenant string, f host.TaskFilter) ([]*host.TaskRecord, error) {
	if tenant != defaultTenant {
		return nil, nil
	}
	return b.h.Store().ListTasks(ctx, f)
}

func (b hostBackend) Task(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	if tenant != defaultTenant {
		return nil, notFound("task", id)
	}
	return b.h.Store().Task(ctx, id)
}

func (b hostBackend) CancelTask(ctx context.Context, tenant, id string) (*host.TaskRecord, error) {
	if _, err := b.Task(ctx, tenant, id); err != nil {
		return nil, err
	}
	return b.h.Store().Cancel(ctx, id)
}

func (b hostBackend) Attempts(ctx context.Context, tenant string, f host.AttemptFilter) ([]*host.Attempt, error) {
	f.Tenant = tenant
	return b.h.Store().ListAttempts(ctx, f)
}

func (b hostBackend) Attempt(ctx context.Context, tenant, id string) (*host.Attempt, error) {
	a, err := b.h.Store().Attempt(ctx, id)
	if err != nil {
		return nil, err
	}
	if a.Tenant != tenant {
		return nil, notFound("attempt", id)
	}
	return a, nil
}

func (b hostBackend) Replay(ctx context.Context, tenant, id string) (*replay.Verdict, error) {
	if _, err := b.Attempt(ctx, tenant, id); err != nil {
		return nil, err
	}
	return b.h.Replay(ctx, id, packrun.ReplayOptions{})
}

func (b hostBackend) Chain(ctx context.Context) (*host.ChainReport, error) {
	return b.h.VerifyChain(ctx, nil)
}

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

// TestConsoleInChromium drives the console in a real headless Chromium:
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

	const token = "prt_0123456789ab_console-test-secret-0123456789"
	operator := &auth.Principal{TokenID: "0123456789ab", Name: "operator", Tenant: defaultTenant,
		Scopes: []auth.Scope{auth.ScopeTasksRead, auth.ScopeTasksWrite, auth.ScopeEvidenceRead}}
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, console.New(console.Config{
		Backend: hostBackend{h},
		Authenticate: func(ctx context.Context, presented string) (*auth.Principal, error) {
			if presented != token {
				return nil, errors.New("unknown token")
			}
			return operator, nil
		},
		Log: func(msg string, kv ...any) { t.Log(append([]any{msg}, kv...)...) },
	}))
	srv := httptest.NewServer(mux)
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
}
