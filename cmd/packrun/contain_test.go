package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// hostilePack writes a signed pack holding one hostile fixture (node
// hostile.<name>, limits as given) and returns its path.
func hostilePack(t *testing.T, h homeCLI, dir, key, name, limits string) string {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join("..", "..", "testdata", "hostile", name+".wasm"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wasm)
	manifest := fmt.Sprintf(`{"name":"local.hostile.%s","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":0},
		"modules":[{"path":"%s.wasm","sha256":"%s"}],"limits":%s},
		"nodes":[{"typeId":"hostile.%s","kind":"node"}]}`, dashed(name), name, hex.EncodeToString(sum[:]), limits, dashed(name))
	if err := os.WriteFile(filepath.Join(src, "pack.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, name+".wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(dir, name+".pack")
	h.ok("pack", src, "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	return pack
}

// dashed is a fixture's name as its pack and node name it.
func dashed(name string) string { return strings.ReplaceAll(name, "_", "-") }

// peakRSS is a process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// TestServeContainsHostileModules runs the hostile modules of the
// containment issue through a live `packrun serve` (POST /v1/invoke): each
// gets its documented outcome and code, the server's peak memory stays
// bounded, and it still serves a good pack afterwards. Before, one
// re-entering module killed the server (fatal error: out of memory) and
// the floods grew it by 300 MB/s. Modules refused at load are refused by
// install, exit 5, with nothing installed.
func TestServeContainsHostileModules(t *testing.T) {
	home, bin := servedHome(t)
	h := homeCLI{t, home}
	dir := t.TempDir()
	key := filepath.Join(dir, "hostile")
	h.ok("keys", "generate", "--out", key)
	h.ok("trust", "add-key", "hostile", key+".pub", "--namespace", "local.hostile.*")

	invokes := []struct {
		name, limits string
		outcome      string
		code         string
		breach       string
	}{
		{"reenter_alloc", `{}`, "failed", "host_reentered", ""},
		{"interrupt_in_alloc", `{}`, "failed", "host_reentered", ""},
		{"variable_flood", `{"memoryPages":256,"timeoutMs":10000}`, "failed", "cap_breached", "host-memory"},
		{"channel_flood", `{"memoryPages":256,"timeoutMs":10000}`, "failed", "cap_breached", "host-memory"},
		{"table_grow", `{"timeoutMs":10000}`, "completed", "", ""},
		{"sleep_past_deadline", `{"timeoutMs":300}`, "failed", "cap_breached", "wasm-execution-time"},
	}
	for _, c := range invokes {
		h.ok("install", hostilePack(t, h, dir, key, c.name, c.limits))
	}
	for _, name := range []string{"table_max_huge", "import_table_global", "grow_refused_in_start"} {
		code, _, errs := h.run("install", hostilePack(t, h, dir, key, name, `{"memoryPages":256}`))
		if code != 5 && code != 4 {
			t.Errorf("install %s: exit %d, want a refusal: %s", name, code, errs)
		}
		if strings.Contains(h.ok("list"), "local.hostile."+dashed(name)+" ") {
			t.Errorf("%s was installed", name)
		}
	}

	s := startServe(t, bin, home)
	s.waitUp(t)
	defer func() {
		s.Process.Signal(syscall.SIGTERM)
		s.Wait()
	}()
	base := s.baseURL(t)
	invoke := func(pack, node, input string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/invoke", strings.NewReader(fmt.Sprintf(`{"pack":%q,"node":%q,"input":%s}`, pack, node, input)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v (serve: %s)", pack, err, s.logs.String())
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", pack, resp.StatusCode, body)
		}
		var out map[string]any
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range invokes {
		t.Run(c.name, func(t *testing.T) {
			out := invoke("local.hostile."+dashed(c.name), "hostile."+dashed(c.name), `{}`)
			if out["outcome"] != c.outcome {
				t.Fatalf("outcome %v, want %s: %v", out["outcome"], c.outcome, out)
			}
			if c.code != "" {
				if e, _ := out["error"].(map[string]any); e == nil || e["code"] != c.code {
					t.Fatalf("error %v, want %s", out["error"], c.code)
				}
			}
			if c.breach != "" {
				events, _ := out["events"].([]any)
				found := false
				for _, e := range events {
					found = found || e.(map[string]any)["kind"] == c.breach
				}
				if !found {
					t.Fatalf("events %v, want a %s breach", events, c.breach)
				}
			}
			good := invoke("local.hello.c", "example.hello", `{"name":"after"}`)
			if fmt.Sprint(good["output"]) != "map[greeting:Hello, after!]" {
				t.Fatalf("hello after %s: %v", c.name, good)
			}
		})
	}
	if peak := peakRSS(t, s.Process.Pid); peak > 768<<20 {
		t.Errorf("serve's peak RSS was %d MiB", peak>>20)
	} else {
		t.Logf("serve's peak RSS: %d MiB", peak>>20)
	}
}

// TestHomeIsOwnerOnly: whichever command creates the home first, it and
// what it holds are readable by their owner only.
func TestHomeIsOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	setup := homeCLI{t, filepath.Join(dir, "setup")}
	setup.ok("keys", "generate", "--out", key)
	setup.ok("pack", "../../examples/hello-c", "-o", pack)
	setup.ok("sign", pack, "--key", key+".key")
	for _, first := range [][]string{
		{"trust", "add-key", "k", key + ".pub", "--namespace", "local.*"},
		{"install", pack, "--allow-unsigned-unsafe"},
		{"tasks", "list"},
	} {
		t.Run(first[0], func(t *testing.T) {
			h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
			h.run(first...) // the verdict does not matter: the home exists now
			h.ok("trust", "add-key", "k2", key+".pub", "--namespace", "local.*")
			h.ok("install", pack)
			for _, p := range []string{"", "blobs", "packrun.db", "trust.json"} {
				fi, err := os.Stat(filepath.Join(h.home, p))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s/%s is %v, want no access for group or others", h.home, p, fi.Mode().Perm())
				}
			}
		})
	}
}

// TestInvokeRefusesBadTenant: the CLI takes tenants by the API's grammar.
func TestInvokeRefusesBadTenant(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	code, _, errs := h.run("invoke", "../../examples/hello-wat/hello.wasm", "--tenant", "../alice")
	if code != 64 || !strings.Contains(errs, `"../alice" is not a tenant name`) {
		t.Fatalf("exit %d: %s", code, errs)
	}
	h.ok("invoke", "../../examples/hello-wat/hello.wasm", "--tenant", "acme")
}
