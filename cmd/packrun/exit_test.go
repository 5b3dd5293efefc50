package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/registry"
	"github.com/packrun/packrun/runtime"
)

// TestExitCodeTable: every class of error maps to the code the README
// documents, whatever wraps it.
func TestExitCodeTable(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("open x: %w", err) }
	cases := []struct {
		err  error
		code int
	}{
		{nil, exitOK},
		{errors.New("disk on fire"), exitOther},
		{withCode(exitSuspended, nil), exitSuspended},
		{&runtime.LoadError{Code: "init_breach", Breach: &runtime.Event{Kind: "wasm-memory"}}, exitBreached},
		{&runtime.LoadError{Code: runtime.CodeModuleLimit}, exitRefused},
		{wrap(registry.ErrUntrusted), exitRefused},
		{wrap(packs.ErrInvalidPack), exitRefused},
		{wrap(host.ErrPackConflict), exitRefused},
		{wrap(packrun.ErrInvalidTrace), exitRefused},
		{wrap(packrun.ErrInvalidBundle), exitRefused},
		{wrap(packrun.ErrInputRefused), exitRefused},
		{wrap(packrun.ErrUsage), exitUsage},
		{wrap(host.ErrValidation), exitUsage},
		{errors.New(`unknown flag: --frobnicate`), exitUsage},
		{wrap(packrun.ErrNotFound), exitNotFound},
		{wrap(packrun.ErrNoHome), exitNotFound},
		{wrap(host.ErrPackNotInstalled), exitNotFound},
		{wrap(host.ErrNotFound), exitNotFound},
		{wrap(runtime.ErrUnknownNode), exitNotFound},
		{wrap(fs.ErrNotExist), exitOther}, // a file the store lost is not the user's missing file
		{wrap(packrun.ErrConfig), exitConfig},
	}
	for _, c := range cases {
		if got := exitCode(c.err); got != c.code {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.code)
		}
	}
}

// TestExitCodesAsANewUserFindsThem: what a new user tried, each with its
// exit code, a one-line error, and for a usage error a hint naming the
// subcommand's help.
func TestExitCodesAsANewUserFindsThem(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	hello := "../../examples/hello-c/hello.wasm"
	installHello(t, h, dir)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pack", filepath.Join(dir, "nope-dir")}, exitNotFound, "nope-dir"},
		{[]string{"invoke", "local.hello.c@garbage"}, exitUsage, `"garbage" is neither a version nor a range`},
		{[]string{"invoke", "local.nope"}, exitNotFound, "local.nope: not installed"},
		{[]string{"invoke", "local.hello.c", "nope"}, exitNotFound, "(nodes: example.hello)"},
		{[]string{"invoke", "../../examples"}, exitUsage, "is a directory: invoke its module (a .wasm file) or pack it first"},
		{[]string{"invoke", hello, "--max-memory", "1KiB"}, exitUsage, "below one 64 KiB page"},
		{[]string{"invoke", hello, "--max-memory", "64GiB"}, exitUsage, "memory limit 64 GiB is above the host maximum 4 GiB"},
		{[]string{"invoke", hello, "--timeout", "1h"}, exitUsage, "timeout limit 1h0m0s is above the host maximum"},
		{[]string{"invoke", hello, "--attempt", "-1"}, exitUsage, "--attempt -1: must be 0 or more"},
		{[]string{"invoke", hello, "--input", "@" + filepath.Join(dir, "missing.json")}, exitNotFound, "missing.json"},
		{[]string{"attempts", "show", "att_nope"}, exitNotFound, "not found"},
		{[]string{"tasks", "show", "task_nope"}, exitNotFound, "not found"},
		{[]string{"memory", "get", "nokey", "--namespace", "x"}, exitNotFound, "not found"},
		{[]string{"replay", "att_nope"}, exitNotFound, "not found"},
		{[]string{"inspect", "local.nope"}, exitNotFound, "not installed"},
		{[]string{"export", "local.nope", "-o", dir}, exitNotFound, "not installed"},
		{[]string{"list", "--home", filepath.Join(dir, "typo")}, exitNotFound, "packrun home does not exist: " + filepath.Join(dir, "typo")},
		{[]string{"tasks", "list", "--home", filepath.Join(dir, "typo")}, exitNotFound, "packrun home does not exist"},
	}
	for _, c := range cases {
		code, out, errs := h.run(c.args...)
		lines := strings.Split(strings.TrimRight(errs, "\n"), "\n")
		switch {
		case code != c.code || !strings.Contains(lines[0], c.want):
			t.Errorf("%v: exit %d (want %d), stderr %q (want %q)", c.args, code, c.code, errs, c.want)
		case code == exitUsage && (len(lines) != 2 || lines[1] != "Run 'packrun "+c.args[0]+" --help' for usage."):
			t.Errorf("%v: usage hint: %q", c.args, errs)
		case code != exitUsage && len(lines) != 1:
			t.Errorf("%v: want one line, got %q", c.args, errs)
		case c.code != exitOK && out != "":
			t.Errorf("%v: stdout %q", c.args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "typo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a read-only command created the mistyped home: %v", err)
	}
}

// installHelloWat packs, signs, trusts and installs examples/hello-wat
// (skill example.hello, task type hello.wat).
func installHelloWat(t *testing.T, h homeCLI, dir string) {
	t.Helper()
	key, pack := filepath.Join(dir, "k"), filepath.Join(dir, "hello.pack")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", "../../examples/hello-wat", "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	h.ok("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	h.ok("install", pack)
}

// installHello packs, signs, trusts and installs examples/hello-c.
func installHello(t *testing.T, h homeCLI, dir string) {
	t.Helper()
	key, pack := filepath.Join(dir, "k"), filepath.Join(dir, "hello.pack")
	h.ok("keys", "generate", "--out", key)
	h.ok("pack", "../../examples/hello-c", "-o", pack)
	h.ok("sign", pack, "--key", key+".key")
	h.ok("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	h.ok("install", pack)
}

// TestReplayAllExitCodes: nothing diverged but some attempts could not
// run exits 1, not 6, and says how many errors it did not list;
// --against replays only that pack's attempts; no progress bar is drawn
// when stderr is not a terminal.
func TestReplayAllExitCodes(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	for i := range 7 {
		h.ok("invoke", "local.hello.c", "--input", fmt.Sprintf(`{"name":"n%d"}`, i))
	}
	h.ok("invoke", "../../examples/hello-go/hello.wasm", "--input", `{"name":"bare"}`)

	code, out, errs := h.run("replay", "--all", "--against", "local.hello.c@1.0.0", "--json")
	var sum packrun.ReplaySummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || code != 0 || sum.Total != 7 || sum.Identical != 7 {
		t.Fatalf("--against: exit %d %s %s (want the 7 attempts of local.hello.c only)", code, out, errs)
	}
	if errs != "" {
		t.Errorf("stderr is not a terminal, yet: %q", errs)
	}

	h.ok("uninstall", "local.hello.c")
	code, out, errs = h.run("replay", "--all")
	if code != exitOther || !strings.Contains(errs, "7 of 8 attempts could not be replayed (none diverged)") {
		t.Fatalf("could not run: exit %d, stderr %q", code, errs)
	}
	if strings.Count(out, "could not run att_") != packrun.MaxListed || !strings.Contains(out, "... and 2 more could not run") {
		t.Errorf("summary:\n%s", out)
	}
}

// Tampering is a refusal (exit 5) everywhere: an attempt row edited
// consistently (its content_hash column recomputed) is found by evidence
// verify, and replay refuses to replay it, alone or in --all.
func TestTamperingIsARefusal(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"a"}`)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"b"}`)
	var atts []struct {
		AttemptID string `json:"attempt_id"`
	}
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &atts); err != nil || len(atts) != 2 {
		t.Fatalf("attempts: %v %v", atts, err)
	}
	victim := atts[0].AttemptID
	if out := h.ok("replay", victim); !strings.Contains(out, "identical") {
		t.Fatalf("replay before tampering: %s", out)
	}

	db, err := sql.Open("sqlite3", filepath.Join(h.home, "packrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TRIGGER attempt_records_no_update`,
		// The output's bytes in the record, edited in place.
		fmt.Sprintf(`UPDATE attempt_records SET record = substr(record, 1, instr(record, X'%[1]x') - 1) || X'%[2]x' || substr(record, instr(record, X'%[1]x') + %[3]d) WHERE attempt_id = '%[4]s'`,
			"Hello, b!", "Hello, m!", len("Hello, b!"), victim),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	if code, _, errs := h.run("evidence", "verify"); code != exitRefused || !strings.Contains(errs, victim) {
		t.Errorf("evidence verify: exit %d, %q (want 5 naming %s)", code, errs, victim)
	}
	if code, _, errs := h.run("replay", victim); code != exitRefused || !strings.Contains(errs, "evidence tampered") || !strings.Contains(errs, victim) {
		t.Errorf("replay: exit %d, %q (want 5: evidence tampered, naming %s)", code, errs, victim)
	}
	code, out, errs := h.run("replay", "--all")
	if code != exitRefused || !strings.Contains(errs, "1 of 2 attempts were changed after they were recorded") || !strings.Contains(out, "could not run "+victim) {
		t.Errorf("replay --all: exit %d\n%s\n%s", code, out, errs)
	}
}

// Deleting the newest attempt with its events leaves a whole chain: the
// signed checkpoint finds the cut, and so does a pinned head when the
// checkpoint is removed as well.
func TestEvidenceVerifyFindsACutChain(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"a"}`)
	out := h.ok("evidence", "verify")
	if !strings.Contains(out, "checked against the host's signed checkpoint") {
		t.Fatalf("verify: %s", out)
	}
	_, head, ok := strings.Cut(out, "\nhead ")
	head, _, _ = strings.Cut(head, "\n")
	if !ok {
		t.Fatalf("no head line: %s", out)
	}
	h.ok("evidence", "verify", "--head", head)
	if code, _, errs := h.run("evidence", "verify", "--head", "12:nothex"); code != exitUsage || !strings.Contains(errs, "is not SEQ:HASH") {
		t.Errorf("bad --head: exit %d %q", code, errs)
	}

	var atts []struct {
		AttemptID string `json:"attempt_id"`
		EventSeq  int64  `json:"event_seq"`
	}
	if err := json.Unmarshal([]byte(h.ok("attempts", "list", "--json")), &atts); err != nil || len(atts) != 1 {
		t.Fatalf("attempts: %v %v", atts, err)
	}
	db, err := sql.Open("sqlite3", filepath.Join(h.home, "packrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DROP TRIGGER attempt_records_no_delete`, `DROP TRIGGER runtime_events_no_delete`,
		`DELETE FROM attempt_records WHERE attempt_id = '` + atts[0].AttemptID + `'`,
		`DELETE FROM runtime_events WHERE attempt_id = '` + atts[0].AttemptID + `'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if code, _, errs := h.run("evidence", "verify"); code != exitRefused || !strings.Contains(errs, "were removed") {
		t.Errorf("cut chain: exit %d %q", code, errs)
	}
	// Removing the checkpoint as well no longer hides the cut (issue 29):
	// the home refuses to open until the operator re-anchors, and a head
	// pinned elsewhere still finds the cut after that.
	os.Remove(filepath.Join(h.home, "evidence-head.json"))
	if code, _, errs := h.run("evidence", "verify", "--head", head); code != exitRefused || !strings.Contains(errs, "evidence-head.json is missing") {
		t.Errorf("cut chain, checkpoint removed: exit %d %q", code, errs)
	}
	h.ok("evidence", "reanchor", "--reason", "checkpoint lost in a restore")
	if code, _, errs := h.run("evidence", "verify", "--head", head); code != exitRefused || !strings.Contains(errs, "pinned head") {
		t.Errorf("cut chain, re-anchored, head pinned: exit %d %q", code, errs)
	}
}

// TestInvokeInputSchemaRefused: input the node's inputSchema refuses exits
// 5 with one line naming the path at fault and the recorded attempt, and
// `packrun replay` of that attempt says identical.
func TestInvokeInputSchemaRefused(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHelloWat(t, h, dir)
	// inspect shows the skill (skill_id defaults to the typeId).
	if code, out, errs := h.run("inspect", "local.hello.wat"); code != exitOK || !strings.Contains(out, "skill:      example.hello (node example.hello)") {
		t.Fatalf("inspect: exit %d %q %q", code, out, errs)
	}
	if out := h.ok("skills"); !strings.Contains(out, "example.hello  local.hello.wat@1.0.0") {
		t.Fatalf("skills: %q", out)
	}
	code, out, errs := h.run("invoke", "local.hello.wat", "--input", `{"name":1}`)
	if code != exitRefused || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "input.name: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	i := strings.Index(errs, "attempt att")
	if i < 0 {
		t.Fatalf("no attempt id in %q", errs)
	}
	id := strings.TrimRight(strings.Fields(errs[i:])[1], ")\n")
	if code, out, errs := h.run("replay", id); code != exitOK || !strings.Contains(out, "identical") {
		t.Fatalf("replay %s: exit %d %q %q", id, code, out, errs)
	}
}
