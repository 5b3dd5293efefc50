package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/witness"
)

// testWitness is an in-process C2SP witness (packrun witness's server)
// for one home's log. hold, when set, makes it answer a cosignature only
// after the test releases it (the witness has recorded it by then).
type testWitness struct {
	w     *witness.Witness
	state string // its state directory
	srv   *httptest.Server
	mu    sync.Mutex
	hold  chan chan struct{}
}

func newTestWitness(t *testing.T, home string) *testWitness {
	t.Helper()
	h, err := packrun.Open(context.Background(), home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := h.LogVerifierKey()
	h.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	origin, _, _ := strings.Cut(vkey, "+")
	return witnessOf(t, origin, vkey)
}

// witnessOf is a testWitness of the log origin, signed by vkey, with its
// key and state in a directory of its own (state).
func witnessOf(t *testing.T, origin, vkey string) *testWitness {
	t.Helper()
	l, err := witness.NewLog(origin, vkey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	key, _, err := witness.LoadOrCreateKey(filepath.Join(dir, "key"), "test-witness")
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	w, err := witness.New(key, []witness.Log{l}, state)
	if err != nil {
		t.Fatal(err)
	}
	tw := &testWitness{w: w, state: state}
	tw.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, r)
		tw.mu.Lock()
		hold := tw.hold
		tw.mu.Unlock()
		if hold != nil && rec.Code == http.StatusOK {
			release := make(chan struct{})
			hold <- release
			<-release
		}
		for k, v := range rec.Header() {
			rw.Header()[k] = v
		}
		rw.WriteHeader(rec.Code)
		rw.Write(rec.Body.Bytes())
	}))
	t.Cleanup(tw.srv.Close)
	return tw
}

func (tw *testWitness) flag() string { return tw.srv.URL + "=" + tw.w.Key().VKey() }

// witnessedServe is a serve process with --witness.
type witnessedServe struct {
	served
	base string
}

var servingOn = regexp.MustCompile(`packrun serving on (http://[0-9.:]+) `)

func startWitnessedServe(t *testing.T, bin, home string, tw *testWitness) witnessedServe {
	t.Helper()
	s := startServeWith(t, bin, home, "--insecure-no-auth", "--witness", tw.flag())
	s.waitUp(t)
	m := servingOn.FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatalf("no address in %q", s.logs.String())
	}
	return witnessedServe{s, m[1]}
}

func (s witnessedServe) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(s.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitFor polls path until ok says yes (at most a minute).
func (s witnessedServe) waitFor(t *testing.T, path, what string, ok func(code int, body string) bool) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body := s.get(t, path)
		if ok(code, body) {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: GET %s still answers %d %s", what, path, code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cosignedSize waits until the witness cosigned a checkpoint of at least
// min entries, checks it and returns its size.
func (s witnessedServe) cosignedSize(t *testing.T, tw *testWitness, min uint64) uint64 {
	t.Helper()
	var size uint64
	s.waitFor(t, "/v1/evidence/checkpoint/cosigned", "cosigned", func(code int, body string) bool {
		if code != http.StatusOK {
			return false
		}
		var c struct {
			Checkpoint string `json:"checkpoint"`
		}
		if err := json.Unmarshal([]byte(body), &c); err != nil {
			t.Fatal(err)
		}
		if _, err := witness.VerifyCosignature([]byte(c.Checkpoint), tw.w.Key().VKey()); err != nil {
			t.Fatalf("served checkpoint: %v\n%s", err, c.Checkpoint)
		}
		lines := strings.SplitN(c.Checkpoint, "\n", 3)
		var n uint64
		for _, ch := range lines[1] {
			n = n*10 + uint64(ch-'0')
		}
		size = n
		return n >= min
	})
	return size
}

func (s witnessedServe) stop(t *testing.T) {
	t.Helper()
	s.Process.Signal(syscall.SIGTERM)
	if err := s.Wait(); err != nil {
		t.Fatalf("serve: %v\n%s", err, s.logs.String())
	}
}

// logSize is the home's integrated evidence log size.
func logSize(t *testing.T, home string) uint64 {
	t.Helper()
	h, err := packrun.Open(context.Background(), home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	cp, err := h.EvidenceLog().LogSync(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cp.Size
}

// tamper runs statements on the home's database with every append-only
// trigger of the chain and the log lifted, and puts them back.
func tamper(t *testing.T, home string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("sqlite3", filepath.Join(home, "packrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var names, triggers []string
	rows, err := db.Query(`SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN ('attempt_records', 'runtime_events', 'evidence_log', 'evidence_tiles', 'evidence_checkpoints')`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, q string
		rows.Scan(&n, &q)
		names, triggers = append(names, n), append(triggers, q)
	}
	rows.Close()
	for _, n := range names {
		if _, err := db.Exec(`DROP TRIGGER ` + n); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range triggers {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
}

// rebuildLog makes the store build its Merkle tree anew from the chain
// as it now is (on the next open), as an attacker covering a rewrite does.
var rebuildLog = []string{`DELETE FROM evidence_tiles`, `DELETE FROM evidence_checkpoints`, `UPDATE evidence_log SET size = 0, root = X'', note = ''`}

// replaceHome replaces every file of home with a fresh home's (keeping
// its host key if keepKey).
func replaceHome(t *testing.T, home string, keepKey bool) {
	t.Helper()
	fresh := helloHome(t).home
	if keepKey {
		key, err := os.ReadFile(filepath.Join(home, "host.key"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(fresh, "host.key"), key, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(home); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(fresh, home); err != nil {
		t.Fatal(err)
	}
}

// Issue 33, item 5: with serve --witness, each laundering of the home's
// evidence (the tail deleted, an entry rewritten, the host key replaced,
// the whole home replaced) is refused by the witness when serve next
// sends a checkpoint: /readyz says degraded naming the witness, the
// refusal is counted and recorded as a witness_refused event, and serve
// keeps serving. Without the witness nothing of this would show: every
// assertion below reads what the witness's refusal caused.
func TestServeWitnessCatchesLaundering(t *testing.T) {
	_, bin := servedHome(t)
	for _, c := range []struct {
		name    string
		launder func(t *testing.T, h homeCLI, held uint64)
		says    string
	}{
		{"tail deleted", func(t *testing.T, h homeCLI, _ uint64) {
			tamper(t, h.home, append([]string{`DELETE FROM attempt_records WHERE seq > 3`, `DELETE FROM runtime_events WHERE seq > 3`}, rebuildLog...)...)
			h.ok("evidence", "reanchor", "--reason", "launder")
		}, "a rollback"},
		{"entry rewritten", func(t *testing.T, h homeCLI, held uint64) {
			// The tree rebuilt with a checkpoint at the size the witness
			// holds, as a careful attacker would: the log then proves
			// itself from there, over the rewritten entry.
			n := strconv.FormatUint(held, 10)
			tamper(t, h.home, append([]string{`UPDATE runtime_events SET hash = '` + strings.Repeat("ab", 32) + `' WHERE seq = (SELECT min(seq) FROM runtime_events WHERE seq > 1)`,
				`CREATE TABLE hidden_events AS SELECT * FROM runtime_events WHERE seq > ` + n, `DELETE FROM runtime_events WHERE seq > ` + n,
				`CREATE TABLE hidden_attempts AS SELECT * FROM attempt_records WHERE seq > ` + n, `DELETE FROM attempt_records WHERE seq > ` + n}, rebuildLog...)...)
			if got := logSize(t, h.home); got != held {
				t.Fatalf("rebuilt to %d, want %d", got, held)
			}
			tamper(t, h.home, `INSERT INTO runtime_events SELECT * FROM hidden_events`, `INSERT INTO attempt_records SELECT * FROM hidden_attempts`,
				`DROP TABLE hidden_events`, `DROP TABLE hidden_attempts`)
		}, "refused (422)"},
		{"host key replaced", func(t *testing.T, h homeCLI, _ uint64) {
			h.ok("evidence", "rotate-key", "--reason", "launder")
		}, "refused"},
		{"home replaced", func(t *testing.T, h homeCLI, _ uint64) {
			replaceHome(t, h.home, false)
		}, "refused (404)"},
		{"home replaced, host key kept", func(t *testing.T, h homeCLI, _ uint64) {
			replaceHome(t, h.home, true)
			h.ok("evidence", "reanchor", "--reason", "launder")
		}, "a rollback"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := helloHome(t)
			enqueueN(t, h.home, 4)
			tw := newTestWitness(t, h.home)
			s := startWitnessedServe(t, bin, h.home, tw)
			s.waitFor(t, "/v1/tasks?status=completed", "tasks", func(code int, body string) bool { return strings.Count(body, `"task_id"`) == 4 })
			s.stop(t)
			want := logSize(t, h.home)
			s = startWitnessedServe(t, bin, h.home, tw)
			held := s.cosignedSize(t, tw, want)
			if _, body := s.get(t, "/readyz"); !strings.Contains(body, `"status":"ready"`) {
				t.Fatalf("/readyz before: %s", body)
			}
			s.stop(t)

			c.launder(t, h, held)
			enqueueN(t, h.home, 1) // a new entry: a new checkpoint to send
			s = startWitnessedServe(t, bin, h.home, tw)
			body := s.waitFor(t, "/readyz", "degraded", func(code int, body string) bool {
				return code == http.StatusOK && strings.Contains(body, `"status":"degraded"`)
			})
			t.Logf("/readyz: %s", body)
			if !strings.Contains(body, tw.srv.URL) || !strings.Contains(body, c.says) || !strings.Contains(body, `"refused":true`) {
				t.Errorf("/readyz: %s (want it to name %s and say %q)", body, tw.srv.URL, c.says)
			}
			if _, m := s.get(t, "/metrics"); !strings.Contains(m, `packrun_witness_refusals_total{witness="`+tw.srv.URL+`"} 1`) {
				t.Errorf("metrics: no refusal counted")
			}
			if code, _ := s.get(t, "/v1/tasks"); code != http.StatusOK {
				t.Errorf("serve stopped serving: %d", code)
			}
			if !strings.Contains(s.logs.String(), "WITNESS REFUSED") {
				t.Errorf("nothing loud in serve's log:\n%s", s.logs.String())
			}
			s.stop(t)
			evs, err := homeStore(t, h.home).Events(context.Background(), host.EventFilter{Type: EventWitnessRefused})
			if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), tw.srv.URL) {
				t.Fatalf("witness_refused events: %v %v", evs, err)
			}
		})
	}
}

// kill -9 of serve after the witness cosigned (and recorded) a checkpoint
// and before serve recorded the cosignature: the restarted serve sends
// from the older size, follows the witness's 409, and gets the next
// checkpoint cosigned; nothing is refused.
func TestServeWitnessKill9BetweenSendAndRecord(t *testing.T) {
	h, bin := servedHome(t)
	tw := newTestWitness(t, h)
	hold := make(chan chan struct{})
	s := startWitnessedServe(t, bin, h, tw)
	first := s.cosignedSize(t, tw, 1)
	tw.mu.Lock()
	tw.hold = hold
	tw.mu.Unlock()
	enqueueN(t, h, 2)
	var release chan struct{}
	select {
	case release = <-hold:
	case <-time.After(time.Minute):
		t.Fatal("serve sent no new checkpoint")
	}
	s.Process.Kill()
	s.Wait()
	close(release)
	tw.mu.Lock()
	tw.hold = nil
	tw.mu.Unlock()
	before, _ := os.ReadFile(filepath.Join(h, witnessStateFile))
	if !strings.Contains(string(before), `"size":`) {
		t.Fatalf("state file: %s", before)
	}

	enqueueN(t, h, 1)
	s = startWitnessedServe(t, bin, h, tw)
	want := first + 1
	if got := s.cosignedSize(t, tw, want); got < want {
		t.Fatalf("cosigned %d", got)
	}
	s.waitFor(t, "/readyz", "ready", func(code int, body string) bool { return strings.Contains(body, `"status":"ready"`) })
	s.stop(t)
	evs, err := homeStore(t, h).Events(context.Background(), host.EventFilter{Type: EventWitnessRefused})
	if err != nil || len(evs) != 0 {
		t.Fatalf("witness_refused after a kill -9: %v %v", evs, err)
	}
}

// A --witness without its key, or with a bad URL or key, is a
// usage error naming the flag on one line, before the home is opened.
func TestServeWitnessFlagRefusals(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	h := homeCLI{t, home}
	vkey := "w+12345678+BAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	for _, c := range []struct{ flag, says string }{
		{"http://127.0.0.1:9", "want URL=VKEY"},
		{"127.0.0.1:9=" + vkey, "http(s) URL"},
		{"http://127.0.0.1:9=notakey", "verifier key"},
	} {
		code, _, errs := h.run("serve", "--addr", "127.0.0.1:0", "--insecure-no-auth", "--witness", c.flag)
		first, _, _ := strings.Cut(errs, "\n")
		if code != exitUsage || !strings.Contains(first, "--witness") || !strings.Contains(first, c.says) {
			t.Errorf("--witness %s: exit %d %q (want 64 saying %q)", c.flag, code, errs, c.says)
		}
	}
	if _, err := os.Stat(home); err == nil {
		t.Errorf("a refused --witness created the home")
	}
}
