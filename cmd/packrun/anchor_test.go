package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
)

// Issue 29, findings 1 and 2: the newest events are deleted (the
// append-only triggers dropped, the rows deleted, the triggers put back)
// and then the checkpoint or the host key is removed or damaged. On
// ccac50d the next open re-created them and `evidence verify` said
// "evidence intact" (exit 0), and serve adopted a new key. Now verify and
// serve exit 5 naming the file, and nothing in the home changes, until the
// operator re-anchors; the re-anchoring is an event in the chain.
func TestLostAnchorIsNeverReTrusted(t *testing.T) {
	for _, c := range []struct {
		name, file, says string
		damage           func(home string)
	}{
		{"checkpoint removed", "evidence-head.json", "is missing", func(home string) { os.Remove(filepath.Join(home, "evidence-head.json")) }},
		{"checkpoint truncated", "evidence-head.json", "is damaged", func(home string) { os.Truncate(filepath.Join(home, "evidence-head.json"), 20) }},
		{"checkpoint emptied", "evidence-head.json", "is damaged", func(home string) { os.Truncate(filepath.Join(home, "evidence-head.json"), 0) }},
		{"checkpoint garbage", "evidence-head.json", "is damaged", func(home string) {
			os.WriteFile(filepath.Join(home, "evidence-head.json"), []byte("\x7fELF garbage \xff\xfe"), 0o644)
		}},
		{"checkpoint of another shape", "evidence-head.json", "is damaged", func(home string) {
			os.WriteFile(filepath.Join(home, "evidence-head.json"), []byte(`{"format":"other","seq":1,"hash":"00"}`), 0o644)
		}},
		{"host key removed", "host.key", "is missing", func(home string) { os.Remove(filepath.Join(home, "host.key")) }},
		{"host key replaced", "host.key", "it was replaced", func(home string) {
			os.WriteFile(filepath.Join(home, "host.key"), []byte(strings.Repeat("5a", 32)+"\n"), 0o600)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			h := homeCLI{t, filepath.Join(dir, "home")}
			installHello(t, h, dir)
			h.ok("invoke", "local.hello.c", "--input", `{"name":"a"}`)
			h.ok("invoke", "local.hello.c", "--input", `{"name":"b"}`)
			cutNewestAttempt(t, h)
			c.damage(h.home)
			before := homeFiles(t, h.home)

			file := filepath.Join(h.home, c.file)
			for _, args := range [][]string{{"evidence", "verify"}, {"evidence", "verify", "--json"}, {"attempts", "list"}, {"serve", "--addr", "127.0.0.1:0"}} {
				done := make(chan struct{})
				var code int
				var errs string
				go func() {
					defer close(done)
					code, _, errs = h.run(args...)
				}()
				select {
				case <-done:
				case <-time.After(60 * time.Second):
					t.Fatalf("packrun %s did not refuse: it is running", strings.Join(args, " "))
				}
				if code != exitRefused || !strings.Contains(errs, file) || !strings.Contains(errs, c.says) || !strings.Contains(errs, "packrun evidence reanchor") {
					t.Errorf("packrun %s: exit %d %q (want 5 naming %s: %s)", strings.Join(args, " "), code, errs, file, c.says)
				}
			}
			if after := homeFiles(t, h.home); after != before {
				t.Fatalf("a refused command changed the home:\n%s\n%s", before, after)
			}

			if code, _, errs := h.run("evidence", "reanchor"); code != exitUsage || !strings.Contains(errs, "reason is required") {
				t.Errorf("reanchor without a reason: exit %d %q", code, errs)
			}
			out := h.ok("evidence", "reanchor", "--reason", "restored from backup, tail lost")
			if !strings.Contains(out, c.says) || !strings.Contains(out, "evidence_reanchored") {
				t.Errorf("reanchor: %s", out)
			}
			if out := h.ok("evidence", "verify"); !strings.Contains(out, "evidence intact") || !strings.Contains(out, "checked against the host's signed checkpoint") {
				t.Errorf("verify after reanchor: %s", out)
			}
			var evs []struct {
				Type string          `json:"type"`
				Data json.RawMessage `json:"data"`
			}
			for line := range strings.Lines(h.ok("events", "--type", "evidence_reanchored", "--json")) {
				var e struct {
					Type string          `json:"type"`
					Data json.RawMessage `json:"data"`
				}
				if err := json.Unmarshal([]byte(line), &e); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				evs = append(evs, e)
			}
			if len(evs) != 1 || !strings.Contains(string(evs[0].Data), "restored from backup, tail lost") || !strings.Contains(string(evs[0].Data), `"problem"`) || !strings.Contains(string(evs[0].Data), `"new_key"`) {
				t.Fatalf("the re-anchoring is not recorded: %+v", evs)
			}
		})
	}
}

// cutNewestAttempt deletes the newest attempt and every event from its
// recording on, as an attacker with the database would: the append-only
// triggers dropped, the rows deleted, the triggers recreated.
func cutNewestAttempt(t *testing.T, h homeCLI) {
	t.Helper()
	db, err := sql.Open("sqlite3", filepath.Join(h.home, "packrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seq int64
	if err := db.QueryRow(`SELECT max(seq) FROM attempt_records`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	var triggers []string
	rows, err := db.Query(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('attempt_records', 'runtime_events')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var q string
		rows.Scan(&q)
		triggers = append(triggers, q)
	}
	rows.Close()
	if len(triggers) == 0 {
		t.Fatal("no append-only triggers")
	}
	for _, q := range []string{`DROP TRIGGER attempt_records_no_delete`, `DROP TRIGGER runtime_events_no_delete`, `DROP TRIGGER attempt_records_no_update`, `DROP TRIGGER runtime_events_no_update`} {
		db.Exec(q)
	}
	for _, q := range []string{`DELETE FROM attempt_records WHERE seq >= ?`, `DELETE FROM runtime_events WHERE seq >= ?`} {
		if _, err := db.Exec(q, seq); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range triggers {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// homeFiles lists the home's top-level files with their sizes, and the
// bytes of its key and checkpoint files.
func homeFiles(t *testing.T, home string) string {
	t.Helper()
	var b strings.Builder
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), "packrun.db") {
			continue // the database's WAL moves when it is opened
		}
		data, _ := os.ReadFile(filepath.Join(home, e.Name()))
		b.WriteString(e.Name() + "=" + string(data) + "\n")
	}
	return b.String()
}

// A rotation: the old key signs the hand-over, the new key anchors the
// chain, the old key file is kept, and verify is intact; the library's
// VerifyKeyRotation checks the hand-over and refuses an edited one.
func TestRotateHostKey(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"a"}`)
	oldKey, _ := os.ReadFile(filepath.Join(h.home, "host.key"))
	var r packrun.Reanchoring
	if err := json.Unmarshal([]byte(h.ok("evidence", "rotate-key", "--reason", "yearly rotation", "--json")), &r); err != nil {
		t.Fatal(err)
	}
	newKey, _ := os.ReadFile(filepath.Join(h.home, "host.key"))
	if string(newKey) == string(oldKey) || r.Event == nil || r.Event.Type != "host_key_rotated" {
		t.Fatalf("rotation: %+v", r)
	}
	if kept, err := os.ReadFile(r.RetiredKeyFile); err != nil || string(kept) != string(oldKey) {
		t.Fatalf("old key not kept in %s: %v", r.RetiredKeyFile, err)
	}
	if fi, err := os.Stat(r.RetiredKeyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("retired key mode: %v", err)
	}
	if err := packrun.VerifyKeyRotation(r.Event.Data); err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(r.Event.Data), r.HostKey, strings.Repeat("0", 64), 1)
	if err := packrun.VerifyKeyRotation(json.RawMessage(edited)); err == nil {
		t.Fatal("an edited hand-over verifies")
	}
	out := h.ok("evidence", "verify")
	if !strings.Contains(out, "evidence intact") || !strings.Contains(out, r.HostKey) {
		t.Fatalf("verify after rotation: %s", out)
	}
	// A rotation of a home whose anchor is lost is refused: re-anchor first.
	os.Remove(filepath.Join(h.home, "evidence-head.json"))
	if code, _, errs := h.run("evidence", "rotate-key", "--reason", "x"); code != exitRefused || !strings.Contains(errs, "is missing") {
		t.Fatalf("rotate a lost anchor: exit %d %q", code, errs)
	}
}

// A host key kept outside the home ($PACKRUN_HOST_KEY_FILE) changes
// nothing: a removed checkpoint is still refused.
func TestLostAnchorWithKeyOutsideHome(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(packrun.HostKeyEnv, filepath.Join(dir, "keys", "host.key"))
	os.MkdirAll(filepath.Join(dir, "keys"), 0o700)
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	h.ok("invoke", "local.hello.c", "--input", `{"name":"a"}`)
	if _, err := os.Stat(filepath.Join(h.home, "host.key")); err == nil {
		t.Fatal("the key was made in the home")
	}
	cutNewestAttempt(t, h)
	os.Remove(filepath.Join(h.home, "evidence-head.json"))
	if code, _, errs := h.run("evidence", "verify"); code != exitRefused || !strings.Contains(errs, "evidence-head.json is missing") {
		t.Fatalf("verify: exit %d %q", code, errs)
	}
}
