package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/adapters"
	"github.com/packrun/packrun/internal/store/sqlite"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

type onePack struct{ arch *packs.Archive }

func (p onePack) Open(_ context.Context, ref string) (*packs.Archive, error) {
	if name, _, _ := strings.Cut(ref, "@"); name != p.arch.Manifest.Name {
		return nil, fmt.Errorf("%w: %s", ErrPackNotInstalled, ref)
	}
	return p.arch, nil
}

// probePack packs testdata/modules/probe.wasm as local.probe with grants.
func probePack(t *testing.T, grants string) *packs.Archive {
	return packOf(t, "probe.wasm", "local.probe", `[{"typeId":"probe.host","kind":"node"},{"typeId":"probe.secret","kind":"node"},
		         {"typeId":"probe.followup","kind":"skill","taskTypes":["probe.start"]}]`, grants)
}

// packOf packs testdata/modules/<module> as pack name with the nodes
// given (JSON) and grants (a manifest fragment starting with a comma, or
// "").
func packOf(t *testing.T, module, name, nodes, grants string) *packs.Archive {
	t.Helper()
	return testPack(t, "../../testdata/modules/"+module, name, 1, `"nodes":`+nodes+grants, nil)
}

// testPack packs the module at path as pack name (version 1.0.0, ABI
// 1.minor) with rest (the manifest's nodes and more members) and assets
// (path under assets/ -> content).
func testPack(t *testing.T, path, name string, minor int, rest string, assets map[string]string) *packs.Archive {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum := sha256.Sum256(wasm)
	base := filepath.Base(path)
	manifest := fmt.Sprintf(`{"name":%q,"version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":%d},
		"modules":[{"path":%q,"sha256":%q}]},%s}`, name, minor, base, hex.EncodeToString(sum[:]), rest)
	os.WriteFile(filepath.Join(dir, "pack.json"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, base), wasm, 0o644)
	for p, content := range assets {
		full := filepath.Join(dir, "assets", filepath.FromSlash(p))
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(content), 0o644)
	}
	b, err := packs.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	arch, err := packs.Read(strings.NewReader(string(b)), packs.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return arch
}

type env struct {
	d       *Dispatcher
	backend *sqlite.Store
}

func newEnv(t *testing.T, grants string) env {
	t.Helper()
	return newEnvWith(t, probePack(t, grants))
}

// echoAdapter configures one adapter, "echo" (/bin/cat).
const echoAdapter = `{"adapters":[{"adapter_id":"echo","kind":"script","command":"/bin/cat","timeout_ms":5000}]}`

// newEnvWith is a dispatcher serving arch over a new store, with one
// adapter, "echo" (/bin/cat).
func newEnvWith(t testing.TB, arch *packs.Archive) env {
	t.Helper()
	return newEnvAdapters(t, arch, echoAdapter)
}

// newEnvAdapters is newEnvWith with the adapters of adaptersJSON.
func newEnvAdapters(t testing.TB, arch *packs.Archive, adaptersJSON string) env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := sqlite.Open(ctx, filepath.Join(dir, "packrun.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return env{newDispatcherOn(t, Config{Backend: b}, arch, adaptersJSON), b}
}

// newDispatcherOn is a dispatcher configured as cfg serving arch, with
// the adapters of adaptersJSON.
func newDispatcherOn(t testing.TB, cfg Config, arch *packs.Archive, adaptersJSON string) *Dispatcher {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	acfg, err := adapters.DecodeConfig([]byte(adaptersJSON))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := adapters.NewRegistry(acfg, filepath.Join(dir, "adapter-runs"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Packs, cfg.Runtime, cfg.Adapters = onePack{arch}, rt, reg
	cfg.PackConfig = map[string]json.RawMessage{arch.Manifest.Name: json.RawMessage(`{"missing":"now present"}`)}
	d := New(cfg)
	t.Cleanup(func() { d.Close(ctx) })
	return d
}

const allGrants = `,"grants":{"services":["memory","adapters","config","queue"],"adapters":["echo"],"memoryNamespaces":["ns"]}`

func TestServicesWithGrants(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, allGrants)
	att, res, err := e.d.Invoke(ctx, InvokeRequest{Pack: "local.probe", Node: "probe.host", Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"put":0,"get":0,"got":{"value":{"n":1}},"adapter":0,"adapterOut":{"error":"","exit_code":0,"exit_status":"ok","output":"hi"},"config":0,"configLen":23}`
	if string(res.Output) != want {
		t.Fatalf("output %s\nwant   %s", res.Output, want)
	}
	// The memory write landed in the invoking tenant only.
	if en, err := e.backend.Get(ctx, host.Scope{Tenant: "acme", Namespace: "ns"}, "k"); err != nil || string(en.Value) != `{"n":1}` {
		t.Fatalf("tenant acme: %v %v", en, err)
	}
	if _, err := e.backend.Get(ctx, host.Scope{Tenant: "other", Namespace: "ns"}, "k"); err == nil {
		t.Fatal("another tenant sees the value")
	}
	// The attempt is evidence, with its trace and the adapter call.
	rec, err := e.backend.Attempt(ctx, att.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Pack != "local.probe@1.0.0" || !strings.Contains(string(rec.Trace), "packrun:host/v1.adapter_invoke") || !strings.Contains(string(rec.AdapterCalls), `"adapter_id":"echo"`) {
		t.Fatalf("attempt %+v", rec)
	}
}

func TestServicesWithoutGrants(t *testing.T) {
	e := newEnv(t, ``)
	_, res, err := e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.probe", Node: "probe.host"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), `"put":1,"get":1`) || !strings.Contains(string(res.Output), `"adapter":1`) || !strings.Contains(string(res.Output), `"config":1`) {
		t.Fatalf("ungranted services answered: %s", res.Output)
	}
	// A namespace outside the grant is denied too.
	e = newEnv(t, `,"grants":{"services":["memory"],"memoryNamespaces":["other"]}`)
	_, res, _ = e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.probe", Node: "probe.host"})
	if !strings.Contains(string(res.Output), `"put":1,"get":1`) {
		t.Fatalf("namespace outside the grant: %s", res.Output)
	}
}

func TestSecretsAreRedactedInEvidence(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, allGrants)
	const secret = "s3cr3t-token-value"
	if err := e.backend.Put(ctx, host.Scope{Tenant: "default", Namespace: "ns"}, "token", json.RawMessage(`"`+secret+`"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	att, res, err := e.d.Invoke(ctx, InvokeRequest{Pack: "local.probe", Node: "probe.secret", Tenant: "default"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Output), secret) {
		t.Fatalf("the module did not get the secret: %s", res.Output)
	}
	rec, _ := e.backend.Attempt(ctx, att.AttemptID)
	whole, _ := json.Marshal(rec)
	if strings.Contains(string(whole), secret) {
		t.Fatalf("secret in evidence: %s", whole)
	}
	if !strings.Contains(string(rec.Output), "[REDACTED:ns/token]") || !strings.Contains(string(rec.Logs), "[REDACTED:ns/token]") {
		t.Fatalf("not redacted as [REDACTED:ns/token]: output %s logs %s", rec.Output, rec.Logs)
	}
}

func TestTaskFollowUpsAppliedOnCompletion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, allGrants)
	if err := e.backend.SetPackTaskTypes(ctx, "local.probe", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "probe.start"}, Pack: "local.probe", Node: "probe.followup"}}); err != nil {
		t.Fatal(err)
	}
	task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "probe.start", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.backend.Claim(ctx, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.d.RunTask(ctx, claimed)
	done, _ := e.backend.Task(ctx, task.TaskID)
	if done.Status != host.TaskCompleted {
		t.Fatalf("task %s: %s", done.Status, done.LastError)
	}
	all, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "probe.next"})
	if len(all) != 1 || all[0].ParentTaskID != task.TaskID {
		t.Fatalf("follow-up: %+v", all)
	}
	atts, _ := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	if len(atts) != 1 || atts[0].Outcome != "completed" {
		t.Fatalf("attempts %+v", atts)
	}
	// An unknown task type fails permanently, with no attempt.
	bad, _ := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "nobody.serves", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
	for {
		c, err := e.backend.Claim(ctx, "test", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if c.TaskID == bad.TaskID {
			e.d.RunTask(ctx, c)
			break
		}
		e.d.RunTask(ctx, c)
	}
	if got, _ := e.backend.Task(ctx, bad.TaskID); got.Status != host.TaskPermanentFailure {
		t.Fatalf("unroutable task: %s", got.Status)
	}
}
