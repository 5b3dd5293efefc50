package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/internal/testing/runstest"
)

// TestOpenwopRunSurvivesSIGKILL: `packrun serve` is killed (SIGKILL) while
// a run's second node runs; the next serve on the home continues the run:
// the first node is not run again, the second is run again as attempt 1
// (here by a pack installed meanwhile that completes), and the run
// completes.
func TestOpenwopRunSurvivesSIGKILL(t *testing.T) {
	hosttest.NeedCommand(t, hosttest.Getenv("WAT2WASM", "wat2wasm"), "wabt not available (apt-get install wabt, or set WAT2WASM)")
	greetType, spinType := owRustHello.typeID, owSpin.typeID
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := owPublisher{t, dir, priv}
	h.ok("trust", "add-registry-key", owRegistryKeyID, base64.StdEncoding.EncodeToString(pub), "--namespace", "vendor.openwop.*")
	h.ok(append([]string{"install"}, p.registryV1(owRustHello)...)...)
	h.ok(append([]string{"install"}, p.registryV1(owSpin)...)...)
	bin := packrunBinary(t)

	s := startServe(t, bin, h.home)
	s.waitUp(t)
	base := s.baseURL(t)
	def := `{"workflowId":"greet-then-spin","nodes":[{"id":"greet","typeId":"` + greetType + `"},{"id":"spin","typeId":"` + spinType + `"}]}`
	if code, body := get(t, "POST", base+"/v1/openwop/workflows", "", def); code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body := get(t, "POST", base+"/v1/runs", "", `{"workflowId":"greet-then-spin","inputs":{"name":"ada"}}`)
	var run struct {
		RunID string `json:"runId"`
	}
	if json.Unmarshal([]byte(body), &run); code != http.StatusCreated && code != http.StatusAccepted || run.RunID == "" {
		t.Fatalf("start run: %d %s", code, body)
	}
	b := homeStore(t, h.home)
	runstest.Wait(t, b, run.RunID, func(r *host.Run, evs []host.RunEvent) bool {
		return runstest.Count(evs, host.RunEventNodeStarted, "spin") == 1
	})
	if err := s.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s.Wait()

	// The spin pack is replaced by one whose node of the same type completes.
	h.ok("uninstall", owSpin.pack)
	fixed := owSpin
	fixed.body = greetBody
	h.ok(append([]string{"install"}, p.registryV1(fixed)...)...)
	s2 := startServe(t, bin, h.home)
	t.Cleanup(func() {
		s2.Process.Signal(syscall.SIGTERM)
		s2.Wait()
	})
	s2.waitUp(t)
	r, evs := runstest.Wait(t, b, run.RunID, func(r *host.Run, _ []host.RunEvent) bool { return host.RunTerminal(r.Status) })
	if r.Status != host.RunCompleted {
		t.Fatalf("run %s %+v: %v", r.Status, r.Error, evs)
	}
	if n := runstest.Count(evs, host.RunEventNodeStarted, "greet"); n != 1 {
		t.Fatalf("greet started %d times: %v", n, evs)
	}
	if n, m := runstest.Count(evs, host.RunEventNodeStarted, "spin"), runstest.Count(evs, host.RunEventNodeDone, "spin"); n != 2 || m != 1 {
		t.Fatalf("spin started %d and completed %d times: %v", n, m, evs)
	}
	var resumed struct {
		NodeID  string `json:"nodeId"`
		Attempt int    `json:"attempt"`
	}
	for _, e := range evs {
		if e.Type == host.RunEventResumed {
			json.Unmarshal(e.Payload, &resumed)
		}
	}
	if resumed.NodeID != "spin" || resumed.Attempt != 1 {
		t.Fatalf("run.resumed %+v: %v", resumed, evs)
	}
}
