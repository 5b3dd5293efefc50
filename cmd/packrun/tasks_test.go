package main

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// helloHome is a home with the signed C hello pack installed (task type
// hello.c), set up through the CLI.
func helloHome(t *testing.T) homeCLI {
	t.Helper()
	return exampleHome(t, "hello-c")
}

// exampleHome is a new home with examples/<example> packed, signed by a
// trusted key and installed.
func exampleHome(t *testing.T, example string) homeCLI {
	t.Helper()
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "example.pack")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", "../../examples/"+example, "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	h.ok("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	h.ok("install", pack)
	return h
}

func (h homeCLI) tasks() []host.TaskRecord {
	h.t.Helper()
	var ts []host.TaskRecord
	if err := json.Unmarshal([]byte(h.ok("tasks", "list", "--json")), &ts); err != nil {
		h.t.Fatal(err)
	}
	return ts
}

// The tasks commands: enqueue, list, show, cancel; every bad request is a
// usage error that names what is wrong and queues nothing — a task type no
// installed pack serves included, as the API refuses it.
func TestTasksCommands(t *testing.T) {
	h := helloHome(t)
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--type", "nobody.serves"}, 66, `resolve task type nobody.serves: no installed pack serves this task type; install one that does, or route it: packrun task-types set TYPE --pack NAME --node TYPEID`},
		{[]string{"--type", "hello.c", "--delay", "-5m"}, 64, "--delay -5m0s: must not be negative"},
		{[]string{"--type", "hello.c", "--max-attempts", "0"}, 64, "--max-attempts 0: must be at least 1"},
		{[]string{"--type", "hello.c", "--max-attempts", "1000"}, 64, "max_attempts: must be between 1 and 100"},
		{[]string{"--type", "hello.c", "--input", "[1]"}, 64, "payload: must be a JSON object"},
		{[]string{"--input", "{}"}, 64, "tasks enqueue needs --type"},
	} {
		code, _, errs := h.run(append([]string{"tasks", "enqueue"}, c.args...)...)
		if code != c.code || !strings.Contains(errs, c.stderr) {
			t.Errorf("enqueue %v: exit %d, stderr %q; want %d and %q", c.args, code, errs, c.code, c.stderr)
		}
	}
	if ts := h.tasks(); len(ts) != 0 {
		t.Fatalf("refused enqueues queued %d tasks", len(ts))
	}

	id := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c", "--input", `{"name":"Ada"}`, "--priority", "1", "--delay", "5m", "--max-attempts", "2"))
	later := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))
	ts := h.tasks()
	if len(ts) != 2 {
		t.Fatalf("%d tasks", len(ts))
	}
	var shown host.TaskRecord
	if err := json.Unmarshal([]byte(h.ok("tasks", "show", id)), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.TaskID != id || shown.Status != host.TaskPending || shown.Priority != 1 || shown.MaxAttempts != 2 ||
		string(shown.Payload) != `{"name":"Ada"}` || time.Until(shown.AvailableAt) < 4*time.Minute {
		t.Fatalf("task %+v", shown)
	}
	if out := h.ok("tasks", "cancel", later); !strings.Contains(out, "operator_canceled") {
		t.Fatalf("cancel: %q", out)
	}
	if out := h.ok("tasks", "list", "--status", "pending"); !strings.Contains(out, id) || strings.Contains(out, later) {
		t.Fatalf("pending:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"tasks", "list", "--limit", "0"}, 64}, {[]string{"attempts", "list", "--limit", "-1"}, 64},
		{[]string{"tasks", "show", "task_nope"}, 66}, {[]string{"tasks", "list", "--status", "done"}, 64},
	} {
		code, _, errs := h.run(c.args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		// One line, and for a usage error a second naming the subcommand's help.
		if code != c.code || code == 64 && (len(lines) != 2 || !strings.HasPrefix(lines[1], "Run 'packrun "+c.args[0]+" ")) || code != 64 && len(lines) != 1 {
			t.Errorf("%v: exit %d (want %d), stderr %q", c.args, code, c.code, errs)
		}
	}
}

// evidence verify --bundle: an exported bundle verifies, and matches the
// store that recorded it; an edited one is refused, and so is a forgery
// whose hashes were all recomputed, against the store that holds the real
// attempt. Elsewhere the bundle is checked on its own.
func TestVerifyBundle(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	h.ok("invoke", "../../examples/hello-c/hello.wasm", "--input", `{"name":"Ada"}`)
	var atts []host.Attempt
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &atts); err != nil || len(atts) != 1 {
		t.Fatalf("%d attempts, %v", len(atts), err)
	}
	// The list's filters.
	for _, c := range []struct {
		args []string
		n    int
	}{
		{[]string{"--since", "1h"}, 1}, {[]string{"--tenant", "default"}, 1}, {[]string{"--tenant", "other"}, 0},
		{[]string{"--pack", "nope"}, 0}, {[]string{"--task", "task_nope"}, 0},
	} {
		var got []host.Attempt
		if err := json.Unmarshal([]byte(h.ok(append([]string{"attempts", "list", "--json"}, c.args...)...)), &got); err != nil || len(got) != c.n {
			t.Errorf("attempts list %v: %d attempts (%v), want %d", c.args, len(got), err, c.n)
		}
	}
	if code, _, _ := h.run("attempts", "list", "--since", "-1h"); code != 64 {
		t.Errorf("--since -1h: exit %d", code)
	}
	file := filepath.Join(dir, "bundle.json")
	h.ok("evidence", "export", atts[0].AttemptID, "-o", file)
	if out := h.ok("evidence", "verify", "--bundle", file); !strings.Contains(out, "bundle intact") || !strings.Contains(out, "matches this store's record") {
		t.Fatalf("verify: %q", out)
	}
	elsewhere := homeCLI{t, filepath.Join(dir, "other")}
	if out := elsewhere.ok("evidence", "verify", "--bundle", file); !strings.Contains(out, "checked on its own") {
		t.Fatalf("verify elsewhere: %q", out)
	}
	if _, err := os.Stat(filepath.Join(elsewhere.home, "packrun.db")); err == nil {
		t.Fatal("verifying a bundle created a store")
	}

	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, "edited.json")
	os.WriteFile(edited, []byte(strings.Replace(string(raw), "Hello, Ada!", "Hello, Eve!", 1)), 0o644)
	if code, _, errs := h.run("evidence", "verify", "--bundle", edited); code != 5 || !strings.Contains(errs, "does not match its content") {
		t.Fatalf("edited bundle: exit %d, %q", code, errs)
	}

	// A forgery: the output changed and every hash recomputed, so the
	// bundle is consistent on its own.
	b, err := evidence.DecodeBundle(raw)
	if err != nil {
		t.Fatal(err)
	}
	b.Attempt.Output = json.RawMessage(`{"greeting":"Hello, Eve!"}`)
	b.Attempt.ContentHash = evidence.HashAttempt(b.Attempt)
	for _, e := range b.Events {
		if e.Type == host.EventAttemptRecorded {
			var d map[string]any
			json.Unmarshal(e.Data, &d)
			d["content_hash"] = b.Attempt.ContentHash
			e.Data, _ = json.Marshal(d)
		}
		e.Hash = evidence.HashEvent(e)
	}
	forgedFile := filepath.Join(dir, "forged.json")
	write := func(b *host.Bundle) {
		forged, _ := json.Marshal(b)
		os.WriteFile(forgedFile, forged, 0o644)
	}
	// Its seal no longer verifies, wherever it is checked.
	write(b)
	if code, _, errs := elsewhere.run("evidence", "verify", "--bundle", forgedFile); code != 5 || !strings.Contains(errs, "seal does not verify") {
		t.Fatalf("resealed forgery elsewhere: exit %d, %q", code, errs)
	}
	// Without a seal it is refused, unless unsealed bundles are allowed
	// (then it is whole on its own, which is all such a bundle can show).
	seal := b.Seal
	b.Seal = nil
	// The log proof it carries proves the record as recorded, not this
	// one: refused. A forger drops it too.
	write(b)
	if code, _, errs := elsewhere.run("evidence", "verify", "--bundle", forgedFile, "--allow-unsealed"); code != 5 || !strings.Contains(errs, "is not the chain hash of attempt") {
		t.Fatalf("forgery with its log proof: exit %d, %q", code, errs)
	}
	b.Log = nil
	write(b)
	if code, _, errs := elsewhere.run("evidence", "verify", "--bundle", forgedFile); code != 5 || !strings.Contains(errs, "not sealed by a host key") {
		t.Fatalf("unsealed forgery: exit %d, %q", code, errs)
	}
	if out := elsewhere.ok("evidence", "verify", "--bundle", forgedFile, "--allow-unsealed"); !strings.Contains(out, "checked on its own") || !strings.Contains(out, "not sealed") {
		t.Fatalf("unsealed forgery allowed: %q", out)
	}
	// Sealed again with another key: accepted where no key is trusted (and
	// the key printed), refused where the real host's key is.
	_, other, _ := ed25519.GenerateKey(nil)
	digest, _ := evidence.BundleDigest(b)
	b.Seal = evidence.SealDigest(other, host.BundleFormat, digest)
	write(b)
	if out := elsewhere.ok("evidence", "verify", "--bundle", forgedFile); !strings.Contains(out, "sealed by host key "+b.Seal.HostKey) {
		t.Fatalf("forgery sealed by another key, nothing trusted: %q", out)
	}
	if code, _, errs := elsewhere.run("evidence", "verify", "--bundle", forgedFile, "--host-key", seal.HostKey); code != 5 || !strings.Contains(errs, "not this host's key nor one passed with --host-key") {
		t.Fatalf("forgery sealed by another key, real key trusted: exit %d, %q", code, errs)
	}
	if out := elsewhere.ok("evidence", "verify", "--bundle", file, "--host-key", seal.HostKey); !strings.Contains(out, "a trusted key") {
		t.Fatalf("the real bundle, its key trusted: %q", out)
	}
	if out := h.ok("evidence", "verify"); !strings.Contains(out, "host key "+seal.HostKey) {
		t.Fatalf("evidence verify does not print the host key: %q", out)
	}
	if code, _, errs := h.run("evidence", "verify", "--bundle", forgedFile); code != 5 || !strings.Contains(errs, "differs from this store's record") {
		t.Fatalf("forgery against the store: exit %d, %q", code, errs)
	}
	for _, bad := range []string{`{"format":1}`, `[]`, ``} {
		p := filepath.Join(dir, "bad.json")
		os.WriteFile(p, []byte(bad), 0o644)
		if code, _, errs := h.run("evidence", "verify", "--bundle", p); code != 5 || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%q: exit %d, %q", bad, code, errs)
		}
	}
}

// attempts list reads a page at a time and prints as it goes: the pages
// join into one list, newest first, cut at --limit.
func TestAttemptsListPages(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	for i := range 5 {
		h.ok("invoke", "local.hello.c", "--input", fmt.Sprintf(`{"name":"n%d"}`, i))
	}
	defer func(n int) { attemptsPage = n }(attemptsPage)
	attemptsPage = 2
	var all []host.Attempt
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &all); err != nil || len(all) != 5 {
		t.Fatalf("all: %d %v", len(all), err)
	}
	for i, a := range all {
		if want := fmt.Sprintf(`{"name":"n%d"}`, 4-i); string(a.Input) != want {
			t.Fatalf("attempt %d has input %s, want %s (newest first)", i, a.Input, want)
		}
	}
	var four []host.Attempt
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json", "--limit", "3")), &four); err != nil || len(four) != 3 || four[2].AttemptID != all[2].AttemptID {
		t.Fatalf("--limit 3: %d %v", len(four), err)
	}
	if rows := strings.Count(strings.TrimSpace(h.ok("attempts", "list")), "\n"); rows != 5 {
		t.Fatalf("table: %d rows", rows)
	}
	if out := h.ok("attempts", "list", "--json", "--pack", "local.none"); strings.TrimSpace(out) != "[\n]" {
		t.Fatalf("empty list: %q", out)
	}
}
