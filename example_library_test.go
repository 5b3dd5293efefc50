package packrun_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
)

// exampleHome opens a host in a new temporary home; done closes it and
// removes the home.
func exampleHome() (h *packrun.Host, done func()) {
	ctx := context.Background()
	home, err := os.MkdirTemp("", "packrun-example-")
	if err != nil {
		log.Fatal(err)
	}
	h, err = packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		log.Fatal(err)
	}
	return h, func() { h.Close(ctx); os.RemoveAll(home) }
}

// signedHello packs the committed example pack examples/hello-c, signs it
// with a new key, and returns it with a trust policy trusting that key for
// local.* packs.
func signedHello() (registry.Signed, *registry.Policy) {
	archive, err := packs.Pack("examples/hello-c")
	if err != nil {
		log.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	bundle, provenance, err := registry.Sign(context.Background(), archive, "local.hello.c", key, registry.SignOptions{
		BuilderID: "https://ci.example/builders/packs@v1", SourceDigest: strings.Repeat("0123456789abcdef", 4),
		BuiltAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)})
	if err != nil {
		log.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		log.Fatal(err)
	}
	policy := registry.NewPolicy()
	if err := policy.AddKey("example", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), []string{"local.*"}); err != nil {
		log.Fatal(err)
	}
	return registry.Signed{Archive: archive, Bundle: bundle, Provenance: provenance}, policy
}

// installHello installs the signed hello pack into h.
func installHello(h *packrun.Host) *host.InstalledPack {
	s, policy := signedHello()
	p, _, err := h.Install(context.Background(), s, packrun.InstallOptions{Policy: policy})
	if err != nil {
		log.Fatal(err)
	}
	return p
}

// Open creates the home on first use; Home names it.
func ExampleOpen() {
	ctx := context.Background()
	home := filepath.Join(os.TempDir(), fmt.Sprintf("packrun-example-open-%d", os.Getpid()))
	defer os.RemoveAll(home)

	h, err := packrun.Open(ctx, home, packrun.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close(ctx)
	_, err = os.Stat(home)
	fmt.Println(h.Home() == home, err == nil)
	// Output:
	// true true
}

// Install verifies a signed pack against a trust policy, stores it and
// routes its task types; installing the same pack again changes nothing.
func ExampleHost_Install() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()

	s, policy := signedHello()
	p, already, err := h.Install(ctx, s, packrun.InstallOptions{Policy: policy})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Ref(), p.Signer != "", already)
	_, already, err = h.Install(ctx, s, packrun.InstallOptions{Policy: policy})
	fmt.Println(already, err)
	// Output:
	// local.hello.c@1.0.0 true false
	// true <nil>
}

// A pack signed by a key the policy does not trust is refused, and
// nothing is installed.
func ExampleHost_Install_untrusted() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()

	s, _ := signedHello()
	_, _, err := h.Install(ctx, s, packrun.InstallOptions{Policy: registry.NewPolicy()})
	fmt.Println(errors.Is(err, registry.ErrUntrusted))
	installed, _ := h.Packs(ctx)
	fmt.Println(len(installed))
	// Output:
	// true
	// 0
}

// InvokePack runs a node of an installed pack, named by pack reference.
func ExampleHost_InvokePack() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()
	installHello(h)

	inv, err := h.InvokePack(ctx, "local.hello.c@^1", packrun.InvokeRequest{Input: []byte(`{"name":"Grace"}`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inv.Result.Outcome, string(inv.Result.Output))
	// Output:
	// completed {"greeting":"Hello, Grace!"}
}

// TaskTypes lists the task types installed packs serve and what each
// routes to.
func ExampleHost_TaskTypes() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()
	installHello(h)

	types, err := h.TaskTypes(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, tt := range types {
		fmt.Println(tt.TaskType)
	}
	// Output:
	// hello.c
}

// Enqueue queues a task; Run dispatches it to the node its task type
// routes to, records the attempt and settles the task.
func ExampleHost_Enqueue() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()
	installHello(h)

	task, err := h.Enqueue(ctx, host.TaskIntent{TaskType: "hello.c", Source: "example", Payload: json.RawMessage(`{"name":"Lin"}`)}, host.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status)

	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- h.Run(runCtx) }()
	for {
		got, err := h.Store().Task(ctx, task.TaskID)
		if err != nil {
			log.Fatal(err)
		}
		if got.Status.Terminal() {
			fmt.Println(got.Status)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	fmt.Println(<-ran)
	atts, _ := h.Store().ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID})
	fmt.Println(len(atts), string(atts[0].Output))
	// Output:
	// pending
	// completed
	// <nil>
	// 1 {"greeting":"Hello, Lin!"}
}

// Replay re-runs a recorded attempt from its trace, with no side effects,
// and says whether the outcome is identical.
func ExampleHost_Replay() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()

	inv, err := h.Invoke(ctx, "examples/hello-wat/hello.wasm", packrun.InvokeRequest{Input: []byte(`{"name":"Kay"}`)})
	if err != nil {
		log.Fatal(err)
	}
	v, err := h.Replay(ctx, inv.Attempt.AttemptID, packrun.ReplayOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(v.Identical)
	// Output:
	// true
}

// VerifyChain re-hashes the evidence chain: every event, attempt and
// artifact the home recorded.
func ExampleHost_VerifyChain() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()
	for _, name := range []string{"a", "b"} {
		if _, err := h.Invoke(ctx, "examples/hello-c/hello.wasm", packrun.InvokeRequest{Input: []byte(`{"name":"` + name + `"}`)}); err != nil {
			log.Fatal(err)
		}
	}
	r, err := h.VerifyChain(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.OK, r.Attempts, r.Broken == nil)
	// Output:
	// true 2 true
}

// Handler serves the HTTP API; here without tokens, as `packrun serve
// --insecure-no-auth` does on a laptop. A task type no pack serves is
// refused with a code a client can match.
func ExampleHost_Handler() {
	ctx := context.Background()
	h, done := exampleHome()
	defer done()

	handler, err := h.Handler(ctx, packrun.HandlerOptions{InsecureNoAuth: true})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	resp, err := http.Post(srv.URL+"/v1/tasks", "application/json", strings.NewReader(`{"task_type":"nobody.serves.this","source":"example","payload":{}}`))
	if err != nil {
		log.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var refusal struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(body, &refusal)
	fmt.Println(resp.StatusCode, refusal.Error.Code)
	// Output:
	// 422 unknown_task_type
}

// ReadFile reads a file the caller names, bounded; a missing one matches
// both ErrNotFound and fs.ErrNotExist.
func ExampleReadFile() {
	_, err := packrun.ReadFile("/nonexistent/input.json", 1<<20)
	fmt.Println(err)
	fmt.Println(errors.Is(err, packrun.ErrNotFound), errors.Is(err, fs.ErrNotExist))
	// Output:
	// /nonexistent/input.json: no such file
	// true true
}

// ParseRef splits a pack reference into the name and the version
// constraint.
func ExampleParseRef() {
	fmt.Println(packrun.ParseRef("local.hello.c@^1.2"))
	fmt.Println(packrun.ParseRef("local.hello.c"))
	// Output:
	// local.hello.c ^1.2
	// local.hello.c
}
