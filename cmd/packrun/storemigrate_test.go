package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/internal/testing/pgtest"
)

// `packrun store migrate` moves a home with an installed pack and a
// recorded attempt into PostgreSQL; the same home with --store then
// lists the pack, verifies the chain, shows and replays the attempt. A
// second migration into the same database is refused (exit 5, one line,
// naming what is there); a missing --to is a usage error.
func TestStoreMigrateCLI(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	id := attemptID(t, h, "invoke", "local.hello.c", "--input", `{"name":"pg"}`)

	var rep struct {
		Tables []struct {
			Table          string
			Source, Target int64
		}
		PackBlobs int `json:"pack_blobs"`
		Chain     struct {
			OK       bool
			Attempts int
			Head     string
		}
	}
	if err := json.Unmarshal([]byte(h.ok("store", "migrate", "--to", dsn, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Chain.OK || rep.Chain.Attempts != 1 || rep.PackBlobs == 0 || len(rep.Tables) == 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, tc := range rep.Tables {
		if tc.Source != tc.Target {
			t.Errorf("table %s: %d in the home, %d copied", tc.Table, tc.Source, tc.Target)
		}
	}

	pg := func(args ...string) string { return h.ok(append([]string{"--store", dsn}, args...)...) }
	if out := pg("list"); !strings.Contains(out, "local.hello.c") {
		t.Fatalf("list on PostgreSQL: %q", out)
	}
	if out := pg("evidence", "verify"); !strings.Contains(out, "evidence intact") || !strings.Contains(out, rep.Chain.Head) {
		t.Fatalf("evidence verify on PostgreSQL: %q", out)
	}
	if out := pg("attempts", "show", id); !strings.Contains(out, id) {
		t.Fatalf("attempts show on PostgreSQL: %q", out)
	}
	pg("replay", id)

	code, out, errs := h.run("store", "migrate", "--to", dsn)
	if code != exitRefused || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "not empty: ") || !strings.Contains(errs, "attempt_records (1 row)") {
		t.Fatalf("second migrate: exit %d %q %q", code, out, errs)
	}
	if code, _, errs := h.run("store", "migrate"); code != exitUsage || !strings.Contains(errs, "needs --to") {
		t.Fatalf("no --to: exit %d %q", code, errs)
	}
}

// The text output names each table with its counts and the chain's head.
func TestStoreMigrateText(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	installHello(t, h, dir)
	out := h.ok("store", "migrate", "--to", dsn)
	for _, want := range []string{"TABLE", "packs", "copied ", "evidence intact in PostgreSQL", "head "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
