package sqlite

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// The store in testdata/store-v5 was written by packrun before attempt
// records (schema version 5, commit 46ac153: `packrun demo --home`, an
// invoke of hello.c, and two failing hostile modules): 39 events, 11
// attempts, head 39:1b78db0e…, with its signed checkpoint and host key.
const (
	v5Head     = "1b78db0eef659404cd91bf7d8ac2ce7f6bdd33301586fae7baf4b08e990bb271"
	v5HeadSeq  = 39
	v5Attempts = 11
)

// openV5 copies the old store to a temporary directory, lets prepare edit
// its database as the old schema stood (nil: as written), and opens it.
func openV5(t *testing.T, prepare func(d *sql.DB)) *fixture {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"packrun.db", "evidence-head.json", "host.key"} {
		b, err := os.ReadFile(filepath.Join("testdata", "store-v5", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "packrun.db")
	if prepare != nil {
		d, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		prepare(d)
		d.Close()
	}
	c := newClock()
	s, err := Open(ctx, path, Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &fixture{Store: s, path: path, clock: c}
}

func TestMigrateV5Store(t *testing.T) {
	f := openV5(t, nil)
	var n int
	f.db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'task_attempts'`).Scan(&n)
	if n != 0 {
		t.Fatal("task_attempts still there")
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Head != v5Head || rep.HeadSeq != v5HeadSeq || rep.Attempts != v5Attempts || rep.Checkpoint == nil || rep.Checkpoint.Seq != v5HeadSeq {
		t.Fatalf("migrated chain: %+v %+v", rep, rep.Broken)
	}
	f.db.QueryRow(`SELECT count(*) FROM runtime_events WHERE type = 'attempt_recorded'`).Scan(&n)
	if n != 0 {
		t.Fatalf("%d attempt_recorded event rows left", n)
	}
	atts, err := f.ListAttempts(ctx, host.AttemptFilter{Limit: 100})
	if err != nil || len(atts) != v5Attempts {
		t.Fatalf("%d attempts, %v", len(atts), err)
	}
	for _, a := range atts {
		if evidence.HashAttemptV1(a) != a.ContentHash {
			t.Fatalf("attempt %s no longer hashes to its content hash", a.AttemptID)
		}
		if err := f.VerifyAttempt(ctx, a.AttemptID); err != nil {
			t.Fatal(err)
		}
		b, err := f.ExportAttempt(ctx, a.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.MarshalIndent(b, "", "  ")
		back, err := evidence.DecodeBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := evidence.VerifyBundle(back); err != nil {
			t.Fatalf("bundle of migrated attempt %s: %v", a.AttemptID, err)
		}
	}
	// The events API still shows each attempt's event as it was stored.
	evs, err := f.Events(ctx, host.EventFilter{Type: host.EventAttemptRecorded})
	if err != nil || len(evs) != v5Attempts {
		t.Fatalf("%d attempt_recorded events, %v", len(evs), err)
	}
	for _, e := range evs {
		if evidence.HashEvent(e) != e.Hash {
			t.Fatalf("event %d does not hash as it did", e.Seq)
		}
	}
	// The chain goes on from the old head, and a reopened store moves
	// nothing again.
	a := &host.Attempt{Node: "n", Input: json.RawMessage(`{}`), Outcome: abi.Completed}
	if err := f.RecordAttempt(ctx, a); err != nil || a.EventSeq != v5HeadSeq+1 {
		t.Fatalf("new attempt at %d: %v", a.EventSeq, err)
	}
	f = reopen(t, f)
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK || rep.Attempts != v5Attempts+1 {
		t.Fatalf("after reopen: %+v %v", rep, err)
	}
	// A migrated attempt edited afterwards is found.
	var seq int64
	var rec []byte
	f.db.QueryRow(`SELECT seq, record FROM attempt_records ORDER BY seq LIMIT 1`).Scan(&seq, &rec)
	old, l, err := evidence.DecodeRecord(rec)
	if err != nil || l == nil {
		t.Fatalf("first record: %v %v", l, err)
	}
	old.Output = json.RawMessage(`{"greeting":"forged"}`)
	tamper(t, f, fmt.Sprintf(`UPDATE attempt_records SET record = X'%x' WHERE seq = %d`, evidence.AppendLegacyRecord(nil, old, *l), seq))
	if rep, _ := f.VerifyChain(ctx); rep.OK || rep.Broken.Problem != host.BreakAttemptHash || rep.Broken.Seq != seq {
		t.Fatalf("edited migrated attempt: %+v", rep.Broken)
	}
}

// Tampering done before the migration is carried over, not repaired: verify
// still finds it afterwards.
func TestMigrateV5StoreKeepsTampering(t *testing.T) {
	var victim string
	for _, tc := range []struct {
		name    string
		sql     []string
		problem string
	}{
		{"attempt edited", []string{`DROP TRIGGER task_attempts_no_update`,
			`UPDATE task_attempts SET output = '{"greeting":"forged"}' WHERE attempt_id = (SELECT attempt_id FROM task_attempts ORDER BY event_seq LIMIT 1)`}, host.BreakAttemptHash},
		{"attempt deleted", []string{`DROP TRIGGER task_attempts_no_delete`,
			`DELETE FROM task_attempts WHERE attempt_id = (SELECT attempt_id FROM task_attempts ORDER BY event_seq LIMIT 1)`}, host.BreakAttemptMissing},
		{"recording event deleted", []string{`DROP TRIGGER runtime_events_no_delete`,
			`DELETE FROM runtime_events WHERE seq = (SELECT min(seq) FROM runtime_events WHERE type = 'attempt_recorded')`}, host.BreakSeqGap},
		{"attempt inserted behind the chain", []string{`INSERT INTO task_attempts SELECT 'att-forged', task_id, runner_id, pack, pack_name, module_sha256, node, tenant, run_id, attempt, abi_version,
				input, output, interrupt, outcome, error, exit_status, retry_class, stdout, stderr, logs, events, trace, limits, adapter_calls, diagnostics,
				started_at, ended_at, content_hash, event_seq FROM task_attempts LIMIT 1`}, host.BreakAttemptUnchain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := openV5(t, func(d *sql.DB) {
				d.QueryRow(`SELECT attempt_id FROM task_attempts ORDER BY event_seq LIMIT 1`).Scan(&victim)
				for _, q := range tc.sql {
					if _, err := d.Exec(q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
			})
			rep, err := f.VerifyChain(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Broken.Problem != tc.problem {
				t.Fatalf("got %+v, want %s", rep.Broken, tc.problem)
			}
			t.Log(rep.Broken.Detail)
		})
	}
	_ = victim
}

// A migration that fails part way leaves the old store as it was.
func TestMigrateV5StoreIsAtomic(t *testing.T) {
	dir := t.TempDir()
	b, _ := os.ReadFile(filepath.Join("testdata", "store-v5", "packrun.db"))
	path := filepath.Join(dir, "packrun.db")
	os.WriteFile(path, b, 0o600)
	d, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Migration 6 applied, then a row that cannot be carried over (an
	// attempt record with its id already there makes the INSERT fail).
	if _, err := d.Exec(migrations[5]); err != nil {
		t.Fatal(err)
	}
	d.Exec(`INSERT INTO schema_migrations (component, version, applied_at) VALUES ('host', 6, 'x')`)
	var id string
	d.QueryRow(`SELECT attempt_id FROM task_attempts ORDER BY event_seq DESC LIMIT 1`).Scan(&id)
	d.Exec(`INSERT INTO attempt_records VALUES (-99, ?, '', 1, '', '', '', X'00', '', '')`, id)
	_, err = moveLegacyAttempts(ctx, d)
	if err == nil || !strings.Contains(err.Error(), id) {
		t.Fatalf("move: %v", err)
	}
	var n int
	d.QueryRow(`SELECT count(*) FROM task_attempts`).Scan(&n)
	var evs int
	d.QueryRow(`SELECT count(*) FROM runtime_events WHERE type = 'attempt_recorded'`).Scan(&evs)
	var trig int
	d.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'runtime_events_no_delete'`).Scan(&trig)
	if n != v5Attempts || evs != v5Attempts || trig != 1 {
		t.Fatalf("after a failed move: %d attempts, %d events, trigger %d", n, evs, trig)
	}
	if errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
}
