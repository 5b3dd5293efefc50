package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/registry"
)

// The RFC 0008 conformance scenarios of openwop's suite
// (conformance/src/scenarios/wasm-pack-*.test.ts), ported: a `packrun
// serve` with the packs their fixtures need installed, spoken to over HTTP
// as the scenarios speak (OPENWOP_BASE_URL, OPENWOP_API_KEY as a bearer
// token, discovery at the document's root, polling GET /v1/runs/{id}). Where
// a scenario soft-skips on a host that does not advertise something, the
// port requires it to be advertised: packrun must pass, not skip.

// owModule is the WAT of a one-node openwop module: abi is what
// openwop_abi_version returns, body the code of openwop_node_invoke
// (params $node $rp $rl, locals $i $s $e $n $out, result i64 = ptr|len<<32).
// It imports openwop_random as RFC 0008 §C declares it (no result).
func owModule(pack, typeID string, abi int, body string) string {
	return fmt.Sprintf(`(module
  (import "openwop" "openwop_random" (func $random (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) %q)
  (data (i32.const 256) %q)
  (data (i32.const 512) "\22name\22:\22")
  (data (i32.const 528) "{\22outcome\22:\22completed\22,\22output\22:{\22greeting\22:\22Hello, ")
  (data (i32.const 640) "!\22}}")
  (data (i32.const 656) "{\22outcome\22:\22completed\22,\22output\22:{\22grown\22:true}}")
  (data (i32.const 720) "{\22outcome\22:\22suspended\22,\22interrupt\22:{\22question\22:\22approve?\22}}")
  (global $heap (mut i32) (i32.const 4096))
  (func $alloc (export "openwop_alloc") (param $size i32) (result i32)
    (local $p i32) (local $end i32) (local $pages i32)
    (local.set $p (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $p) (local.get $size)) (i32.const 7)) (i32.const -8)))
    (local.set $pages (i32.shr_u (i32.add (local.get $end) (i32.const 65535)) (i32.const 16)))
    (if (i32.gt_u (local.get $pages) (memory.size))
      (then (if (i32.eq (memory.grow (i32.sub (local.get $pages) (memory.size))) (i32.const -1))
        (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $p))
  (func (export "openwop_free") (param i32 i32))
  (func $copy (param $dst i32) (param $src i32) (param $n i32)
    (block $done (loop $l
      (br_if $done (i32.eqz (local.get $n)))
      (i32.store8 (local.get $dst) (i32.load8_u (local.get $src)))
      (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
      (local.set $src (i32.add (local.get $src) (i32.const 1)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br $l))))
  (func (export "openwop_abi_version") (result i32) (i32.const %d))
  (func (export "openwop_node_count") (result i32) (i32.const 1))
  (func (export "openwop_pack_name") (result i64) (i64.or (i64.const 16) (i64.shl (i64.const %d) (i64.const 32))))
  (func (export "openwop_node_id_at") (param i32) (result i64) (i64.or (i64.const 256) (i64.shl (i64.const %d) (i64.const 32))))
  (func (export "openwop_node_invoke") (param $node i32) (param $rp i32) (param $rl i32) (result i64)
    (local $i i32) (local $s i32) (local $e i32) (local $n i32) (local $out i32)
%s))
`, pack, typeID, abi, len(pack), len(typeID), body)
}

// greetBody answers {"greeting":"Hello, <inputs.name>!"} as openwop's
// rust-hello greet does: it finds the first "name":" in the request and
// copies up to the next quote. It draws 8 random bytes first (unused), so
// its trace holds an openwop_random call for replay to answer.
const greetBody = `    (call $random (i32.const 1024) (i32.const 8))
    (local.set $s (i32.const -1))
    (block $found (loop $scan
      (br_if $found (i32.gt_u (i32.add (local.get $i) (i32.const 8)) (local.get $rl)))
      (if (i64.eq (i64.load (i32.add (local.get $rp) (local.get $i))) (i64.load (i32.const 512)))
        (then (local.set $s (i32.add (i32.add (local.get $rp) (local.get $i)) (i32.const 8))) (br $found)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $scan)))
    (local.set $e (local.get $s))
    (if (i32.ge_s (local.get $s) (i32.const 0))
      (then (block $end (loop $q
        (br_if $end (i32.ge_u (local.get $e) (i32.add (local.get $rp) (local.get $rl))))
        (br_if $end (i32.eq (i32.load8_u (local.get $e)) (i32.const 34)))
        (local.set $e (i32.add (local.get $e) (i32.const 1)))
        (br $q))))
      (else (local.set $s (i32.const 0)) (local.set $e (i32.const 0))))
    (local.set $n (i32.add (i32.const 56) (i32.sub (local.get $e) (local.get $s))))
    (local.set $out (call $alloc (local.get $n)))
    (call $copy (local.get $out) (i32.const 528) (i32.const 52))
    (call $copy (i32.add (local.get $out) (i32.const 52)) (local.get $s) (i32.sub (local.get $e) (local.get $s)))
    (call $copy (i32.add (i32.add (local.get $out) (i32.const 52)) (i32.sub (local.get $e) (local.get $s))) (i32.const 640) (i32.const 4))
    (i64.or (i64.extend_i32_u (local.get $out)) (i64.shl (i64.extend_i32_u (local.get $n)) (i64.const 32)))`

// bombBody grows memory 16 MiB at a time until a grow is refused, then
// claims to have completed: the host must report the breach anyway.
const bombBody = `    (block $refused (loop $grow
      (br_if $refused (i32.eq (memory.grow (i32.const 256)) (i32.const -1)))
      (br $grow)))
    (i64.or (i64.const 656) (i64.shl (i64.const 47) (i64.const 32)))`

// spinBody never returns: only a cancel or the time limit stops it.
const spinBody = `    (loop $l (br $l))
    (i64.const 0)`

// suspendBody returns outcome "suspended" without calling
// openwop_interrupt (RFC 0008 §D's second pattern).
const suspendBody = `    (i64.or (i64.const 720) (i64.shl (i64.const 59) (i64.const 32)))`

// owSource is one openwop module a home is offered: its pack and node
// names, the version its openwop_abi_version reports, and its code.
type owSource struct {
	pack, typeID string
	abi          int
	body         string
}

var (
	owRustHello  = owSource{"vendor.openwop.rust-hello", "vendor.openwop.rust-hello.greet", 1, greetBody}
	owMemoryBomb = owSource{"vendor.openwop.misbehaving", "vendor.openwop.misbehaving.memory-bomb", 1, bombBody}
	owABIBomb    = owSource{"vendor.openwop.misbehaving-abi", "vendor.openwop.misbehaving.abi-bomb", 999, greetBody}
	owSpin       = owSource{"vendor.openwop.spin", "vendor.openwop.spin.forever", 1, spinBody}
	owAsk        = owSource{"vendor.openwop.ask", "vendor.openwop.ask.approve", 1, suspendBody}
)

// wasm compiles the module's WAT (owModule) with wat2wasm in dir.
func (s owSource) wasm(t *testing.T, dir string) []byte {
	t.Helper()
	wat := filepath.Join(dir, s.pack+".wat")
	if err := os.WriteFile(wat, []byte(owModule(s.pack, s.typeID, s.abi, s.body)), 0o644); err != nil {
		t.Fatal(err)
	}
	return hosttest.Build(t, s.pack+".wasm", func(out string) error {
		return hosttest.Run(exec.Command(hosttest.Getenv("WAT2WASM", "wat2wasm"), wat, "-o", out))
	})
}

// packJSON is the module's pack.json as openwop writes one, version
// 1.0.0: engines, a node with version, category, role and label, and
// runtime.entry. Callers adjust it before owJSON.
func (s owSource) packJSON(engines, entry string) map[string]any {
	return map[string]any{
		"kind": "node", "name": s.pack, "version": "1.0.0", "license": "Apache-2.0",
		"description": "an openwop module of packrun's tests", "author": "packrun tests",
		"engines": map[string]any{"openwop": engines},
		"nodes":   []any{map[string]any{"typeId": s.typeID, "version": "1.0.0", "category": "data", "role": "transform", "label": s.typeID}},
		"runtime": map[string]any{"language": "wasm", "entry": entry, "format": "wasm"},
	}
}

// owJSON is pack.json's bytes, indented as openwop's files are.
func owJSON(t *testing.T, pj map[string]any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(pj, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// owRegistryKeyID names the registry key the tests sign as, as openwop's
// registry names its own.
const owRegistryKeyID = "openwop-registry-root"

// owPublisher writes openwop packs as they are published: a registry's
// signed .tgz for the packs it serves, or a fixture pack an operator builds
// from the WAT openwop ships.
type owPublisher struct {
	t   *testing.T
	dir string
	key ed25519.PrivateKey
}

// write writes name's bytes in the publisher's directory, returning its path.
func (p owPublisher) write(name string, b []byte) string {
	p.t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// published is s laid out as openwop's registry published rust-hello
// 1.0.0: runtime.entry names cargo's output path, which the tarball does
// not hold, and the module is under dist/ instead. It returns pack.json
// and the tarball.
func (p owPublisher) published(s owSource, engines string, signing map[string]any) ([]byte, []byte) {
	mod := strings.ReplaceAll(strings.TrimPrefix(s.pack, "vendor.openwop."), "-", "_") + ".wasm"
	m := s.packJSON(engines, "target/wasm32-unknown-unknown/release/"+mod)
	if signing != nil {
		m["signing"] = signing
	}
	pj := owJSON(p.t, m)
	return pj, hosttest.OpenwopTarball(p.t, map[string][]byte{
		"pack.json":   pj,
		"README.md":   []byte("# " + s.pack + "\n"),
		"dist/" + mod: s.wasm(p.t, p.dir),
	})
}

// registryV1 publishes s as openwop's registry published rust-hello
// (engines >=1.1 <2.0.0) with VERSION.tgz.sig, a detached Ed25519
// signature over the tarball bytes. It returns the install arguments.
func (p owPublisher) registryV1(s owSource) []string {
	_, tgz := p.published(s, ">=1.1 <2.0.0", nil)
	path := p.write(s.pack+"-1.0.0.tgz", tgz)
	p.write(s.pack+"-1.0.0.tgz.sig", []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(p.key, tgz))))
	return []string{path}
}

// registryV2 publishes s as a v2 registry does: pack.json names the
// signing key and scheme, the .sig is over its RFC 8785 canonical form,
// and the version manifest's integrity pins the tarball (packrun requires
// the pin, since the signature does not cover the module).
func (p owPublisher) registryV2(s owSource) []string {
	pj, tgz := p.published(s, ">=2.0.0 <3.0.0", map[string]any{"keyId": owRegistryKeyID, "scheme": "ed25519-canonical-json"})
	canon, err := jsoncanonicalizer.Transform(pj)
	if err != nil {
		p.t.Fatal(err)
	}
	path := p.write(s.pack+"-1.0.0.tgz", tgz)
	p.write(s.pack+"-1.0.0.tgz.sig", []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(p.key, canon))))
	return []string{path, "--integrity", registry.Integrity(tgz)}
}

// fixture is one of openwop's conformance fixture packs
// (conformance/fixtures/wasm-packs/*: a pack.json, engines >=2.0.0
// <3.0.0, runtime.entry module.wasm, and module.wat), published unsigned.
// The operator compiles the WAT, tars the directory and installs it with
// --allow-unsigned-unsafe: it is openwop's own test fixture, read and
// built here, and there is no publisher's signature to check, so signing
// it with a key of one's own would vouch for nothing more.
func (p owPublisher) fixture(s owSource) []string {
	pj := s.packJSON(">=2.0.0 <3.0.0", "module.wasm")
	pj["version"] = "2.0.0"
	pj["runtime"].(map[string]any)["minRuntimeVersion"] = "1"
	tgz := hosttest.OpenwopTarball(p.t, map[string][]byte{
		"pack.json":   owJSON(p.t, pj),
		"module.wat":  []byte(owModule(s.pack, s.typeID, s.abi, s.body)),
		"module.wasm": s.wasm(p.t, p.dir),
	})
	return []string{p.write(s.pack+"-fixture.tgz", tgz), "--allow-unsigned-unsafe"}
}

// owInstall is a way the registry's packs reach a home.
type owInstall struct {
	name    string
	publish func(owPublisher, owSource) []string
}

var owInstalls = []owInstall{
	{"registry-v1-tarball-signature", owPublisher.registryV1},
	{"registry-v2-canonical-json", owPublisher.registryV2},
}

// openwopHost is a served home, its API key and its CLI, with the three
// RFC 0008 fixture packs offered: rust-hello and misbehaving install,
// misbehaving-abi is refused (exit 5, naming 999).
type openwopHost struct {
	base, key string
	h         homeCLI
}

// openwopServe makes a fresh home with a token of the default tenant
// (scopes) and returns it with a function that starts serve on it (again
// after a kill), waits for it and returns it with the openwopHost on its
// address; a serve still running when the test ends is stopped with
// SIGTERM. What the openwop scenario tests share.
func openwopServe(t *testing.T, scopes string) (homeCLI, func() (served, openwopHost)) {
	t.Helper()
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	key := newToken(h, "default", scopes)
	bin := packrunBinary(t)
	return h, func() (served, openwopHost) {
		t.Helper()
		s := startServeWith(t, bin, h.home)
		t.Cleanup(func() {
			if s.ProcessState == nil {
				s.Process.Signal(syscall.SIGTERM)
				s.Wait()
			}
		})
		s.waitUp(t)
		return s, openwopHost{base: s.baseURL(t), key: key, h: h}
	}
}

// startOpenwopHost serves a fresh home, checks discovery lists no
// fixture, then installs through the CLI, as an operator would, the
// registry's packs (rust-hello, and the spin and ask packs of
// TestOpenwopRuns published alike) as install publishes them, the
// registry's key trusted for vendor.openwop.*, and openwop's two
// misbehaving fixture packs. Discovery reads the store on each request: the
// scenarios' "advertised" checks see the fixtures once installed.
func startOpenwopHost(t *testing.T, install owInstall) openwopHost {
	t.Helper()
	hosttest.NeedCommand(t, hosttest.Getenv("WAT2WASM", "wat2wasm"), "wabt not available (apt-get install wabt, or set WAT2WASM)")
	h, serve := openwopServe(t, "invoke,tasks:read,tasks:write")
	_, o := serve()
	for _, f := range o.fixtures(t) { // the core fixtures need no pack
		if strings.HasPrefix(f.(string), "conformance-wasm-pack-") {
			t.Fatalf("fixture %v advertised before its packs are installed", f)
		}
	}

	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := owPublisher{t, t.TempDir(), priv}
	h.ok("trust", "add-registry-key", owRegistryKeyID, base64.StdEncoding.EncodeToString(pub), "--namespace", "vendor.openwop.*")
	for _, src := range []owSource{owRustHello, owSpin, owAsk} {
		out := h.ok(append([]string{"install"}, install.publish(p, src)...)...)
		if !strings.Contains(out, "signed by registry-key:"+owRegistryKeyID) || !strings.Contains(out, "using dist/") {
			t.Fatalf("install of %s:\n%s", src.pack, out)
		}
	}
	if out := h.ok(append([]string{"install"}, p.fixture(owMemoryBomb)...)...); !strings.Contains(out, "signed by unsigned") {
		t.Fatalf("install of %s:\n%s", owMemoryBomb.pack, out)
	}
	code, _, errs := h.run(append([]string{"install"}, p.fixture(owABIBomb)...)...)
	if code != exitRefused || !strings.Contains(errs, "unsupported_abi_version") || !strings.Contains(errs, "999") {
		t.Fatalf("installing the ABI 999 pack: exit %d, %s", code, errs)
	}
	return o
}

// do sends a request as openwop's driver does and decodes the JSON answer.
func (o openwopHost) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var b string
	if body != nil {
		j, _ := json.Marshal(body)
		b = string(j)
	}
	code, text := get(t, method, o.base+path, o.key, b)
	var v map[string]any
	json.Unmarshal([]byte(text), &v)
	return code, v
}

// wasmCaps is discovery's nodePackRuntimes.wasm, read at the document root.
func (o openwopHost) wasmCaps(t *testing.T) map[string]any {
	t.Helper()
	code, d := o.do(t, "GET", "/.well-known/openwop", nil)
	npr, _ := d["nodePackRuntimes"].(map[string]any)
	wasm, _ := npr["wasm"].(map[string]any)
	if code != 200 || wasm == nil || wasm["supported"] != true {
		t.Fatalf("discovery: %d %v", code, d)
	}
	return wasm
}

// fixtures is discovery's fixtures.
func (o openwopHost) fixtures(t *testing.T) []any {
	t.Helper()
	code, d := o.do(t, "GET", "/.well-known/openwop", nil)
	fs, ok := d["fixtures"].([]any)
	if code != 200 || !ok {
		t.Fatalf("discovery: %d %v", code, d)
	}
	return fs
}

// advertised requires fixture to be in discovery's fixtures.
func (o openwopHost) advertised(t *testing.T, fixture string) {
	t.Helper()
	if fs := o.fixtures(t); !slices.Contains(fs, any(fixture)) {
		t.Fatalf("fixture %s not advertised: %v", fixture, fs)
	}
}

func (o openwopHost) startRun(t *testing.T, workflowID string, inputs any) string {
	t.Helper()
	code, v := o.do(t, "POST", "/v1/runs", map[string]any{"workflowId": workflowID, "inputs": inputs})
	id, _ := v["runId"].(string)
	if code != http.StatusCreated || id == "" {
		t.Fatalf("POST /v1/runs %s: %d %v", workflowID, code, v)
	}
	return id
}

// pollUntilTerminal polls GET /v1/runs/{id} every 250 ms, as polling.ts
// does, until the status is completed, failed or cancelled.
func (o openwopHost) pollUntilTerminal(t *testing.T, runID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second) // the scenarios' 15 s, scaled for a loaded machine
	var last map[string]any
	for time.Now().Before(deadline) {
		code, v := o.do(t, "GET", "/v1/runs/"+runID, nil)
		if code == 200 {
			last = v
			if s := v["status"]; s == "completed" || s == "failed" || s == "cancelled" {
				return v
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("run %s did not reach a terminal status (last %v)", runID, last)
	return nil
}

func (o openwopHost) events(t *testing.T, runID string) []map[string]any {
	t.Helper()
	code, text := get(t, "GET", o.base+"/v1/runs/"+runID+"/events", o.key, "")
	var v struct{ Events []map[string]any }
	if code != 200 || json.Unmarshal([]byte(text), &v) != nil {
		t.Fatalf("events of %s: %d %s", runID, code, text)
	}
	return v.Events
}

func findEvent(evs []map[string]any, typ string) map[string]any {
	for _, e := range evs {
		if e["type"] == typ {
			return e
		}
	}
	return nil
}

var greeting = regexp.MustCompile(`Hello, ([^!]+)!`)

// TestOpenwopRFC0008Scenarios runs the scenarios on a fresh home for each
// way a registry publishes rust-hello.
func TestOpenwopRFC0008Scenarios(t *testing.T) {
	for _, install := range owInstalls {
		t.Run(install.name, func(t *testing.T) { openwopScenarios(t, startOpenwopHost(t, install)) })
	}
}

// openwopScenarios runs the six RFC 0008 scenarios against o.
func openwopScenarios(t *testing.T, o openwopHost) {
	const roundtrip = "conformance-wasm-pack-roundtrip"

	// wasm-pack-load.test.ts
	t.Run("wasm-pack-load", func(t *testing.T) {
		wasm := o.wasmCaps(t)
		if vs, _ := wasm["abiVersions"].([]any); !slices.Contains(vs, any(1.0)) {
			t.Fatalf("abiVersions %v lacks 1", wasm["abiVersions"])
		}
		o.advertised(t, roundtrip)
		runID := o.startRun(t, roundtrip, map[string]any{"name": "world"})
		o.do(t, "POST", "/v1/runs/"+runID+"/cancel", map[string]any{"reason": "conformance-cleanup"})
	})

	// wasm-pack-invoke-completed.test.ts
	t.Run("wasm-pack-invoke-completed", func(t *testing.T) {
		o.advertised(t, roundtrip)
		o.wasmCaps(t)
		runID := o.startRun(t, roundtrip, map[string]any{"name": "openwop"})
		if s := o.pollUntilTerminal(t, runID)["status"]; s != "completed" {
			t.Fatalf("status %v", s)
		}
		evs := o.events(t, runID)
		node, _ := json.Marshal(findEvent(evs, "node.completed"))
		all, _ := json.Marshal(evs)
		if !strings.Contains(strings.ToLower(string(node)), "hello, openwop") && !strings.Contains(strings.ToLower(string(all)), "hello, openwop") {
			t.Fatalf("no greeting in the events: %s", all)
		}
		if !strings.Contains(strings.ToLower(string(node)), "hello, openwop") {
			t.Fatalf("node.completed does not carry the output: %s", node)
		}
	})

	// wasm-pack-invoke-suspended.test.ts
	t.Run("wasm-pack-invoke-suspended", func(t *testing.T) {
		o.advertised(t, roundtrip)
		o.wasmCaps(t)
		runID := o.startRun(t, roundtrip, map[string]any{"name": "suspend-probe"})
		term := o.pollUntilTerminal(t, runID)
		if term["status"] == "failed" {
			all, _ := json.Marshal(o.events(t, runID))
			h := strings.ToLower(string(all))
			if !strings.Contains(h, "wasm_suspend_not_implemented") && !strings.Contains(h, "suspend_not_supported") {
				t.Fatalf("failed without a recognisable code: %s", all)
			}
			return
		}
		if term["status"] != "completed" {
			t.Fatalf("status %v", term["status"])
		}
	})

	// wasm-pack-replay-determinism.test.ts, then a :fork in replay mode of
	// the first run, answered from its recorded trace.
	t.Run("wasm-pack-replay-determinism", func(t *testing.T) {
		o.advertised(t, roundtrip)
		o.wasmCaps(t)
		run := func() (string, string) {
			runID := o.startRun(t, roundtrip, map[string]any{"name": "determinism-probe"})
			o.pollUntilTerminal(t, runID)
			all, _ := json.Marshal(o.events(t, runID))
			m := greeting.FindStringSubmatch(string(all))
			if m == nil {
				return runID, ""
			}
			return runID, m[1]
		}
		first, a := run()
		_, b := run()
		if a == "" || a != b {
			t.Fatalf("greetings %q and %q", a, b)
		}
		code, v := o.do(t, "POST", "/v1/runs/"+first+":fork", map[string]any{"mode": "replay"})
		fork, _ := v["runId"].(string)
		if code != http.StatusCreated || fork == "" || v["sourceRunId"] != first || v["eventsUrl"] != "/v1/runs/"+fork+"/events" {
			t.Fatalf("fork: %d %v", code, v)
		}
		if s := o.pollUntilTerminal(t, fork)["status"]; s != "completed" {
			t.Fatalf("fork status %v: %v", s, o.events(t, fork))
		}
		node, _ := json.Marshal(findEvent(o.events(t, fork), "node.completed"))
		if m := greeting.FindStringSubmatch(string(node)); m == nil || m[1] != a || !strings.Contains(string(node), `"replayed":true`) {
			t.Fatalf("fork's node.completed: %s", node)
		}
		// From seq 3 (the source's node.completed): events 1-2 are fixed
		// history, the node is replayed.
		code, v = o.do(t, "POST", "/v1/runs/"+first+":fork", map[string]any{"mode": "replay", "fromSeq": 3})
		from3, _ := v["runId"].(string)
		if code != http.StatusCreated || v["fromSeq"] != 3.0 {
			t.Fatalf("fork from 3: %d %v", code, v)
		}
		o.pollUntilTerminal(t, from3)
		var types []string
		for _, e := range o.events(t, from3) {
			types = append(types, fmt.Sprint(e["type"]))
		}
		if got := strings.Join(types, ","); got != "run.started,node.started,node.completed,run.completed" {
			t.Fatalf("fork from 3 events: %s", got)
		}
		if code, v := o.do(t, "POST", "/v1/runs/"+first+":fork", map[string]any{"mode": "replay", "fromSeq": 99}); code != http.StatusUnprocessableEntity {
			t.Fatalf("fork past the end: %d %v", code, v)
		}
		for _, bad := range []map[string]any{{"mode": "branch"}, {"mode": "replay", "fromSeq": -1},
			{"mode": "replay", "runOptionsOverlay": map[string]any{"configurable": map[string]any{"model": "x"}}}} {
			if code, v := o.do(t, "POST", "/v1/runs/"+first+":fork", bad); code != http.StatusBadRequest {
				t.Fatalf("fork %v: %d %v", bad, code, v)
			}
		}
	})

	// wasm-pack-memory-cap.test.ts
	t.Run("wasm-pack-memory-cap", func(t *testing.T) {
		wasm := o.wasmCaps(t)
		maxMem, ok := wasm["maxMemoryBytes"].(float64)
		if !ok || maxMem < 1<<20 || maxMem > 8<<30 {
			t.Fatalf("maxMemoryBytes %v", wasm["maxMemoryBytes"])
		}
		const fixture = "conformance-wasm-pack-memory-cap-breach"
		o.advertised(t, fixture)
		runID := o.startRun(t, fixture, map[string]any{})
		if s := o.pollUntilTerminal(t, runID)["status"]; s != "failed" {
			t.Fatalf("status %v", s)
		}
		breach := findEvent(o.events(t, runID), "cap.breached")
		payload, _ := breach["payload"].(map[string]any)
		data, _ := breach["data"].(map[string]any)
		if payload["kind"] != "wasm-memory" || data["kind"] != "wasm-memory" {
			t.Fatalf("cap.breached %v", breach)
		}
	})

	// wasm-pack-abi-version-rejection.test.ts, and the fixture that needs
	// the refused pack: not advertised, and a run of it refused with a 4xx.
	t.Run("wasm-pack-abi-version-rejection", func(t *testing.T) {
		wasm := o.wasmCaps(t)
		vs, ok := wasm["abiVersions"].([]any)
		if !ok || len(vs) == 0 || !slices.Contains(vs, any(1.0)) {
			t.Fatalf("abiVersions %v", wasm["abiVersions"])
		}
		for _, v := range vs {
			if f, ok := v.(float64); !ok || f != float64(int(f)) || f <= 0 {
				t.Fatalf("abiVersions entry %v is not a positive integer", v)
			}
		}
		loaded, ok := wasm["loadedPacks"].([]any)
		if !ok || !slices.Contains(loaded, any("vendor.openwop.rust-hello")) {
			t.Fatalf("loadedPacks %v", wasm["loadedPacks"])
		}
		if slices.Contains(loaded, any("vendor.openwop.misbehaving-abi")) {
			t.Fatalf("the ABI 999 pack is loaded: %v", loaded)
		}
		_, d := o.do(t, "GET", "/.well-known/openwop", nil)
		if fs, _ := d["fixtures"].([]any); slices.Contains(fs, any("conformance-wasm-pack-abi-mismatch")) {
			t.Fatalf("abi-mismatch fixture advertised: %v", fs)
		}
		code, v := o.do(t, "POST", "/v1/runs", map[string]any{"workflowId": "conformance-wasm-pack-abi-mismatch"})
		if code < 400 || code > 499 || !strings.Contains(fmt.Sprint(v), "vendor.openwop.misbehaving.abi-bomb") {
			t.Fatalf("run of abi-mismatch: %d %v", code, v)
		}
	})
}

// newToken creates a token of tenant with scopes (printed on the last line).
func newToken(h homeCLI, tenant, scopes string) string {
	created := h.ok("tokens", "create", "--tenant", tenant, "--scopes", scopes)
	return strings.TrimSpace(created[strings.LastIndex(strings.TrimRight(created, "\n"), "\n")+1:])
}

func (o openwopHost) token(tenant, scopes string) string { return newToken(o.h, tenant, scopes) }

// TestOpenwopRuns: what the scenarios do not reach. Workflows registered
// over HTTP run their nodes in order; bodies are strict; a run is its
// tenant's (another's answers 404); scopes gate the routes; cancel ends a
// run mid-node and is refused once the run is terminal.
func TestOpenwopRuns(t *testing.T) {
	o := startOpenwopHost(t, owInstalls[0])
	const greet = "vendor.openwop.rust-hello.greet"
	def := map[string]any{"workflowId": "greet-twice", "nodes": []map[string]string{{"id": "a", "typeId": greet}, {"id": "b", "typeId": greet}}}
	if code, v := o.do(t, "POST", "/v1/openwop/workflows", def); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, v)
	}
	runID := o.startRun(t, "greet-twice", map[string]any{"name": "twice"})
	if s := o.pollUntilTerminal(t, runID)["status"]; s != "completed" {
		t.Fatalf("status %v", s)
	}
	var nodes []any
	for _, e := range o.events(t, runID) {
		if e["type"] == "node.completed" {
			nodes = append(nodes, e["nodeId"])
		}
	}
	if fmt.Sprint(nodes) != "[a b]" {
		t.Fatalf("completed nodes %v", nodes)
	}
	// The attempts are recorded evidence, attempt 0 as openwop counts.
	var atts []map[string]any
	json.Unmarshal([]byte(o.h.ok("attempts", "list", "--json")), &atts)
	found := 0
	for _, a := range atts {
		if a["run_id"] == runID && a["attempt"] == 0.0 {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("%d attempts of run %s with attempt 0 in %v", found, runID, atts)
	}

	for _, c := range []struct {
		path string
		body any
		code int
		says string
	}{
		{"/v1/openwop/workflows", map[string]any{"workflowId": "x", "nodes": []any{}}, 400, "nodes"},
		{"/v1/openwop/workflows", map[string]any{"workflowId": "conformance-wasm-pack-roundtrip", "nodes": []map[string]string{{"id": "a", "typeId": greet}}}, 409, "built-in"},
		{"/v1/openwop/workflows", map[string]any{"workflowId": "x", "nodes": []map[string]string{{"id": "a", "typeId": greet}}, "extra": 1}, 400, "extra"},
		{"/v1/runs", map[string]any{"workflowId": "greet-twice", "inputs": []int{1}}, 400, "inputs"},
		{"/v1/runs", map[string]any{"workflowId": "nope"}, 404, "nope"},
		{"/v1/runs", map[string]any{"workflowId": "greet-twice", "tenant": "other"}, 400, "tenant"},
		{"/v1/runs/" + runID + ":fork", map[string]any{}, 400, "mode"},
		{"/v1/runs/" + runID + ":rewind", map[string]any{}, 404, "rewind"},
		{"/v1/runs/" + runID + "/cancel", map[string]any{}, 409, "completed"},
	} {
		code, v := o.do(t, "POST", c.path, c.body)
		if code != c.code || !strings.Contains(fmt.Sprint(v), c.says) {
			t.Errorf("POST %s %v: %d %v, want %d naming %s", c.path, c.body, code, v, c.code, c.says)
		}
	}

	// Another tenant's token sees nothing; a token without invoke cannot start a run.
	other := o.token("other", "invoke,tasks:read")
	if code, _ := get(t, "GET", o.base+"/v1/runs/"+runID, other, ""); code != http.StatusNotFound {
		t.Fatalf("another tenant's GET: %d", code)
	}
	if code, _ := get(t, "GET", o.base+"/v1/runs/"+runID+"/events", other, ""); code != http.StatusNotFound {
		t.Fatalf("another tenant's events: %d", code)
	}
	if code, _ := get(t, "POST", o.base+"/v1/runs/"+runID+":fork", other, `{"mode":"replay"}`); code != http.StatusNotFound {
		t.Fatalf("another tenant's fork: %d", code)
	}
	if code, _ := get(t, "POST", o.base+"/v1/runs", o.token("default", "tasks:read"), `{"workflowId":"greet-twice"}`); code != http.StatusForbidden {
		t.Fatalf("POST /v1/runs without invoke: %d", code)
	}

	// A node that suspends makes its run wait for a person, its interrupt
	// (of no openwop kind: "custom") in node.suspended and
	// interrupt.requested. Resolved, the node runs again as its next
	// attempt; this one suspends again, and the run waits again.
	def = map[string]any{"workflowId": "ask", "nodes": []map[string]string{{"id": "q", "typeId": "vendor.openwop.ask.approve"}}}
	if code, v := o.do(t, "POST", "/v1/openwop/workflows", def); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, v)
	}
	ask := o.startRun(t, "ask", nil)
	if v := o.pollUntilStatus(t, ask, "waiting-approval"); v["currentNodeId"] != "q" {
		t.Fatalf("suspending run: %v", v)
	}
	askEvs := o.events(t, ask)
	if e := findEvent(askEvs, "node.suspended"); !strings.Contains(fmt.Sprint(e["payload"]), "approve?") {
		t.Fatalf("node.suspended %v", e)
	}
	if p, _ := findEvent(askEvs, "interrupt.requested")["payload"].(map[string]any); p["kind"] != "custom" || findEvent(askEvs, "approval.requested") != nil {
		t.Fatalf("interrupt.requested %v (events %v)", p, askEvs)
	}
	if code, v := o.do(t, "POST", "/v1/runs/"+ask+"/interrupts/q", map[string]any{"resumeValue": map[string]any{"approved": true}}); code != http.StatusOK || v["status"] != "running" {
		t.Fatalf("resolve: %d %v", code, v)
	}
	o.pollUntilStatus(t, ask, "waiting-approval")
	started := 0
	for _, e := range o.events(t, ask) {
		if e["type"] == "node.started" {
			started++
			if p, _ := e["payload"].(map[string]any); p["attempt"] != float64(started-1) {
				t.Errorf("node.started %d: %v", started, e)
			}
		}
	}
	if r := findEvent(o.events(t, ask), "interrupt.resolved"); started != 2 || !strings.Contains(fmt.Sprint(r["payload"]), "approved:true") {
		t.Fatalf("%d node.started, interrupt.resolved %v", started, r)
	}
	if code, v := o.do(t, "POST", "/v1/runs/"+ask+"/cancel", nil); code != http.StatusOK || v["status"] != "cancelled" {
		t.Fatalf("cancel the waiting run: %d %v", code, v)
	}

	// cap-breach.test.ts@b675e604a7, with five greet nodes standing in for
	// conformance-cap-breach's core.noop ones: configurable.recursionLimit
	// 3 fails the run recursion_limit_exceeded, with one cap.breached of
	// kind node-executions before run.failed, and the fourth node never
	// starts.
	def = map[string]any{"workflowId": "five-greets", "nodes": []map[string]string{{"id": "a", "typeId": greet}, {"id": "b", "typeId": greet},
		{"id": "c", "typeId": greet}, {"id": "d", "typeId": greet}, {"id": "e", "typeId": greet}}}
	if code, v := o.do(t, "POST", "/v1/openwop/workflows", def); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, v)
	}
	code, v := o.do(t, "POST", "/v1/runs", map[string]any{"workflowId": "five-greets", "inputs": map[string]any{"name": "cap"}, "configurable": map[string]any{"recursionLimit": 3}})
	capped, _ := v["runId"].(string)
	if code != http.StatusCreated || capped == "" {
		t.Fatalf("start with recursionLimit 3: %d %v", code, v)
	}
	term := o.pollUntilTerminal(t, capped)
	if e, _ := term["error"].(map[string]any); term["status"] != "failed" || e["code"] != "recursion_limit_exceeded" || e["message"] == "" {
		t.Fatalf("capped run: %v", term)
	}
	var breaches []map[string]any
	started, breachAt, failedAt := 0, -1, -1
	for i, e := range o.events(t, capped) {
		switch e["type"] {
		case "cap.breached":
			breaches, breachAt = append(breaches, e), i
		case "run.failed":
			failedAt = i
		case "node.started":
			started++
		}
	}
	if len(breaches) != 1 || breachAt > failedAt || started != 3 {
		t.Fatalf("%d cap.breached (at %d, run.failed at %d), %d node.started", len(breaches), breachAt, failedAt, started)
	}
	if p, _ := breaches[0]["payload"].(map[string]any); p["kind"] != "node-executions" || p["limit"] != 3.0 || p["observed"].(float64) <= 3 || p["nodeId"] != "d" {
		t.Fatalf("cap.breached %v", p)
	}
	for _, c := range []struct {
		conf map[string]any
		says string
	}{{map[string]any{"recursionLimit": 0}, "configurable.recursionLimit"}, {map[string]any{"recursionLimit": 1.5}, "configurable.recursionLimit"}, {map[string]any{"model": "x"}, "configurable.model"}} {
		if code, v := o.do(t, "POST", "/v1/runs", map[string]any{"workflowId": "five-greets", "configurable": c.conf}); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(v), c.says) {
			t.Errorf("configurable %v: %d %v", c.conf, code, v)
		}
	}

	// Cancel stops the node being executed.
	def = map[string]any{"workflowId": "spin", "nodes": []map[string]string{{"id": "s", "typeId": "vendor.openwop.spin.forever"}, {"id": "g", "typeId": greet}}}
	if code, v := o.do(t, "POST", "/v1/openwop/workflows", def); code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, v)
	}
	spin := o.startRun(t, "spin", nil)
	if code, v := o.do(t, "POST", "/v1/runs/"+spin+":cancel", map[string]any{"reason": "enough"}); code != 200 || v["status"] != "cancelled" {
		t.Fatalf("cancel: %d %v", code, v)
	}
	if s := o.pollUntilTerminal(t, spin)["status"]; s != "cancelled" {
		t.Fatalf("status %v", s)
	}
	// Nothing follows run.cancelled: the second node never starts.
	evs := o.events(t, spin)
	if last := evs[len(evs)-1]["type"]; last != "run.cancelled" || findEvent(evs, "node.completed") != nil || len(evs) != 3 {
		t.Fatalf("events after cancel: %v", evs)
	}
}
