package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The auditor's story (issue 33, items 4, 5 and 7): attempts are made, the
// auditor saves a checkpoint, more attempts are made, one is exported with
// --since-checkpoint the saved checkpoint, and in an empty directory with no home at
// all `evidence check` proves it is in the log and that the log only
// grew. Every tampering exits 5 with one line naming it; a log whose tail
// was deleted fails `evidence verify --checkpoint`.
func TestAuditorChecksBundleOffline(t *testing.T) {
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	attemptID(t, h, "invoke", "local.hello.c", "--input", `{"name":"a"}`)
	second := attemptID(t, h, "invoke", "local.hello.c", "--input", `{"name":"b"}`)
	old := filepath.Join(dir, "old.checkpoint")
	h.ok("evidence", "checkpoint", "-o", old)
	var cp logCheckpointJSON
	if err := json.Unmarshal([]byte(h.ok("evidence", "checkpoint", "--json")), &cp); err != nil || cp.Size == 0 || cp.VerifierKey == "" {
		t.Fatalf("checkpoint --json: %+v %v", cp, err)
	}
	if note, _ := os.ReadFile(old); string(note) != cp.Note {
		t.Fatalf("-o wrote %q, --json says %q", note, cp.Note)
	}
	third := attemptID(t, h, "invoke", "local.hello.c", "--input", `{"name":"c"}`)
	attemptID(t, h, "invoke", "local.hello.c", "--input", `{"name":"d"}`)
	bundle := filepath.Join(dir, "bundle.json")
	h.ok("evidence", "export", third, "-o", bundle, "--since-checkpoint", old)
	proof := filepath.Join(dir, "proof.json")
	h.ok("evidence", "prove", third, "--since-checkpoint", old, "-o", proof)
	if out := h.ok("evidence", "verify", "--bundle", bundle); !strings.Contains(out, "bundle intact") {
		t.Fatalf("verify --bundle: %q", out)
	}
	// A bundle without the log proof (as exported before it) still
	// verifies: the seal does not cover the proof.
	var stripped map[string]json.RawMessage
	raw, _ := os.ReadFile(bundle)
	if err := json.Unmarshal(raw, &stripped); err != nil || stripped["log"] == nil {
		t.Fatalf("the bundle carries no log proof: %v", err)
	}
	delete(stripped, "log")
	oldStyle := filepath.Join(dir, "old-style.json")
	raw, _ = json.Marshal(stripped)
	os.WriteFile(oldStyle, raw, 0o644)
	if out := h.ok("evidence", "verify", "--bundle", oldStyle); !strings.Contains(out, "bundle intact") {
		t.Fatalf("verify --bundle of a bundle without its log proof: %q", out)
	}
	if code, _, errs := h.run("evidence", "check", oldStyle, "--checkpoint", old); code != exitRefused || !strings.Contains(errs, "carries no log proof") {
		t.Fatalf("check of a bundle without its log proof: exit %d %q", code, errs)
	}
	newer := filepath.Join(dir, "new.checkpoint")
	h.ok("evidence", "checkpoint", "-o", newer)
	if out := h.ok("evidence", "consistency", old, newer); !strings.Contains(out, "consistent: the log of size") {
		t.Fatalf("consistency: %q", out)
	}
	if out := h.ok("evidence", "verify", "--checkpoint", old); !strings.Contains(out, "evidence log consistent") {
		t.Fatalf("verify --checkpoint: %q", out)
	}

	// Another home: its checkpoint is signed by another key.
	other := homeCLI{t, filepath.Join(dir, "other")}
	os.Mkdir(filepath.Join(dir, "o"), 0o755)
	installHello(t, other, filepath.Join(dir, "o"))
	attemptID(t, other, "invoke", "local.hello.c", "--input", `{"name":"x"}`)
	foreign := filepath.Join(dir, "foreign.checkpoint")
	other.ok("evidence", "checkpoint", "-o", foreign)
	foreignNote, _ := os.ReadFile(foreign)
	var foreignCP logCheckpointJSON
	if err := json.Unmarshal([]byte(other.ok("evidence", "checkpoint", "--json")), &foreignCP); err != nil {
		t.Fatal(err)
	}

	// The auditor: an empty directory, no HOME, no PACKRUN_HOME.
	audit := t.TempDir()
	for _, f := range []string{bundle, proof, old, foreign} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(audit, filepath.Base(f)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(audit)
	t.Setenv("HOME", "")
	t.Setenv("PACKRUN_HOME", "")
	t.Setenv("PACKRUN_STORE", "")
	check := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"evidence", "check"}, args...), strings.NewReader(""), &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, b := range []string{"bundle.json", "proof.json"} {
		code, out, errs := check(b, "--checkpoint", "old.checkpoint")
		if code != 0 || !strings.Contains(out, "ok: ") || !strings.Contains(out, "it signs your saved checkpoint") {
			t.Fatalf("check %s: exit %d %q %q", b, code, out, errs)
		}
		if code, out, errs := check(b, "--checkpoint", "old.checkpoint", "--key", cp.VerifierKey); code != 0 || !strings.Contains(out, "given with --key") {
			t.Fatalf("check %s --key: exit %d %q %q", b, code, out, errs)
		}
	}
	if code, out, _ := check("bundle.json", "--checkpoint", "old.checkpoint"); code != 0 || !strings.Contains(out, third) {
		t.Fatalf("the attempt is not named: %d %q", code, out)
	}
	if entries, _ := os.ReadDir(audit); len(entries) != 4 {
		t.Fatalf("evidence check wrote into the directory: %v", entries)
	}

	orig, err := os.ReadFile("bundle.json")
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(log map[string]any)) []byte {
		var b map[string]json.RawMessage
		var log map[string]any
		if err := json.Unmarshal(orig, &b); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b["log"], &log); err != nil {
			t.Fatal(err)
		}
		f(log)
		var err error
		if b["log"], err = json.Marshal(log); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	flip := func(s string) string {
		if s[0] == 'A' {
			return "B" + s[1:]
		}
		return "A" + s[1:]
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		saved string
		key   string
		says  string
	}{
		{"record byte changed", bytes.Replace(orig, []byte(`"greeting"`), []byte(`"greetinG"`), 1), "old.checkpoint", "", "content hash"},
		{"proof of another entry", edit(func(l map[string]any) { l["index"] = l["index"].(float64) - 1 }), "old.checkpoint", "", "not of attempt"},
		{"proof hash changed", edit(func(l map[string]any) {
			p := l["proof"].([]any)
			p[0] = flip(p[0].(string))
		}), "old.checkpoint", "", "inclusion proof"},
		{"consistency hash changed", edit(func(l map[string]any) {
			p := l["since"].(map[string]any)["proof"].([]any)
			p[0] = flip(p[0].(string))
		}), "old.checkpoint", "", "consistency proof"},
		{"checkpoint from another key", edit(func(l map[string]any) { l["checkpoint"] = string(foreignNote) }), "old.checkpoint", "", "not signed by the log's key"},
		{"saved checkpoint from another key", orig, "foreign.checkpoint", "", "saved checkpoint: not signed by the log's key"},
		{"another log's key given", orig, "old.checkpoint", foreignCP.VerifierKey, "saved checkpoint: not signed by the log's key"},
		{"no consistency proof", edit(func(l map[string]any) { delete(l, "since") }), "old.checkpoint", "", "no consistency proof from the saved checkpoint"},
		{"truncated", orig[:len(orig)/2], "old.checkpoint", "", "bundle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile("tampered.json", tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"tampered.json", "--checkpoint", tc.saved}
			if tc.key != "" {
				args = append(args, "--key", tc.key)
			}
			code, out, errs := check(args...)
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			if code != exitRefused || len(lines) != 1 || !strings.Contains(errs, tc.says) || !strings.Contains(errs, "tampered.json") {
				t.Fatalf("exit %d %q %q, want 5 with one line naming %q", code, out, errs, tc.says)
			}
		})
	}
	os.Remove("tampered.json")

	// The operator deletes the log's tail (the append-only triggers
	// lifted): the log rebuilt on the next open is shorter than the
	// checkpoint the auditor kept. Rewriting an entry instead makes
	// other entries under the checkpoint's size.
	rewrite := homeCLI{t, filepath.Join(dir, "rewrite")}
	if err := os.CopyFS(rewrite.home, os.DirFS(h.home)); err != nil {
		t.Fatal(err)
	}
	tamperLog(t, h.home, func(db *sql.DB) error {
		var seq int64
		if err := db.QueryRow(`SELECT seq FROM attempt_records WHERE attempt_id = ?`, second).Scan(&seq); err != nil {
			return err
		}
		if _, err := db.Exec(`DELETE FROM attempt_records WHERE seq >= ?`, seq); err != nil {
			return err
		}
		_, err := db.Exec(`DELETE FROM runtime_events WHERE seq >= ?`, seq)
		return err
	})
	code, _, errs := h.run("evidence", "verify", "--checkpoint", old)
	if code != exitRefused || !strings.Contains(errs, "fewer than the checkpoint's") || !strings.Contains(errs, old) {
		t.Fatalf("tail deleted: exit %d %q", code, errs)
	}
	tamperLog(t, rewrite.home, func(db *sql.DB) error {
		_, err := db.Exec(`UPDATE runtime_events SET hash = ? WHERE seq = (SELECT min(seq) FROM runtime_events)`, strings.Repeat("ab", 32))
		return err
	})
	code, _, errs = rewrite.run("evidence", "verify", "--checkpoint", old)
	if code != exitRefused || !strings.Contains(errs, "are not the ones the checkpoint signed") {
		t.Fatalf("entry rewritten: exit %d %q", code, errs)
	}
	code, _, errs = h.run("evidence", "verify", "--checkpoint", foreign)
	if code != exitRefused || !strings.Contains(errs, "not this log's") {
		t.Fatalf("another log's checkpoint: exit %d %q", code, errs)
	}
}

// tamperLog runs do with the append-only triggers of the chain and the log
// lifted, then empties the log (its tiles, checkpoints and size) so that
// the next open rebuilds it from the chain as it now is, and puts the
// triggers back.
func tamperLog(t *testing.T, home string, do func(db *sql.DB) error) {
	t.Helper()
	db, err := sql.Open("sqlite3", filepath.Join(home, "packrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names, triggers []string
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('attempt_records', 'runtime_events', 'evidence_tiles', 'evidence_log', 'evidence_checkpoints')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, s string
		rows.Scan(&n, &s)
		names, triggers = append(names, n), append(triggers, s)
	}
	rows.Close()
	for _, n := range names {
		if _, err := db.Exec(`DROP TRIGGER ` + n); err != nil {
			t.Fatal(err)
		}
	}
	if err := do(db); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`DELETE FROM evidence_tiles`, `DELETE FROM evidence_checkpoints`, `UPDATE evidence_log SET size = 0, root = X'', note = ''`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range triggers {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
}
