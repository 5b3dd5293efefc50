package sqlite

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/packrun/packrun/internal/store/storecore"
)

// seedEvidence fills a store with a bit of everything and returns the
// attempt and artifact it recorded.
func seedEvidence(t *testing.T, f *fixture) (*host.Attempt, *host.Artifact) {
	t.Helper()
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{})
	task := mustClaim(t, f.Store, f.clock.Now())
	a := &host.Attempt{
		AttemptID: "att-1", TaskID: task.TaskID, Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "demo.node",
		Tenant: "acme", RunID: "run-1", Attempt: 1, ABIVersion: "1.0",
		Input: json.RawMessage(`{ "q": "<hi>" }`), Output: json.RawMessage(`{"answer": 42}`), Outcome: abi.Completed,
		Stdout: []byte("hello\n"), Stderr: []byte{0xff, 0x00}, Logs: json.RawMessage(`[{"level":"info","message":"m"}]`),
		Events: json.RawMessage(`[{"type":"cap.breached","kind":"host-calls","limit":1,"observed":2}]`),
		Trace:  json.RawMessage(`[{"fn":"openwop_random","result":"AAEC"},{"fn":"memory_get","status":0,"result":{"v":1}}]`),
		Limits: json.RawMessage(`{"memoryBytes":1048576}`), AdapterCalls: json.RawMessage(`[{"adapter":"http","status":200}]`),
		Error: &abi.Error{Code: "x", Message: "a & b", Details: json.RawMessage(`{"k": [1, 2]}`)},
	}
	if err := f.RecordAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	art, err := f.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: a.AttemptID, Role: host.RoleOutput, Name: "out/report.md", ContentType: "text/markdown", Data: []byte("# report\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: task.TaskID, Data: json.RawMessage(`{"note":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		t.Fatal(err)
	}
	return a, art
}

// recordEdit returns the SQL that replaces attempt id's record with the
// record of the attempt as edit changes it, as an attacker who knows the
// format would; with relink it also recomputes the attempt's link in the
// chain to match.
func recordEdit(t *testing.T, f *fixture, id string, edit func(*host.Attempt), relink bool) string {
	t.Helper()
	a, err := f.Attempt(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	edit(a)
	rec := evidence.AppendRecord(nil, a)
	q := fmt.Sprintf(`UPDATE attempt_records SET record = X'%x'`, rec)
	if relink {
		var prev string
		if err := f.db.QueryRow(`SELECT prev_hash FROM attempt_records WHERE attempt_id = ?`, id).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		q += `, hash = '` + evidence.LinkAttempt(a.EventSeq, prev, evidence.HashRecord(rec)) + `'`
	}
	return q + ` WHERE attempt_id = '` + id + `'`
}

// tamper runs SQL directly on the database, as an attacker with file access
// would, after dropping the append-only triggers.
func tamper(t *testing.T, f *fixture, stmts ...string) {
	t.Helper()
	for _, drop := range []string{"runtime_events_no_update", "runtime_events_no_delete", "attempt_records_no_update", "attempt_records_no_delete"} {
		if _, err := f.db.Exec(`DROP TRIGGER IF EXISTS ` + drop); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range stmts {
		if _, err := f.db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestVerifyChain(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	rep, err := f.VerifyChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Broken != nil || rep.Attempts != 1 || rep.Artifacts != 1 || rep.Events < 7 {
		t.Fatalf("fresh chain: %+v %+v", rep, rep.Broken)
	}
	evs, _ := f.Events(ctx, host.EventFilter{})
	if rep.Head != evs[len(evs)-1].Hash || evs[0].PrevHash != evidence.GenesisHash {
		t.Fatal("head or genesis wrong")
	}
	// Every event's data is stored compacted; HTML-significant characters
	// survive, so does the attempt's content hash.
	got, _ := f.Attempt(ctx, a.AttemptID)
	if evidence.HashAttempt(got) != a.ContentHash || string(got.Input) != `{"q":"\u003chi\u003e"}` || !bytes.Equal(got.Stderr, []byte{0xff, 0}) {
		t.Fatalf("attempt did not round-trip: %s %q", got.Input, got.Stderr)
	}
}

func TestVerifyChainFindsTampering(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(t *testing.T, f *fixture, a *host.Attempt, art *host.Artifact) (seq int64, sql []string)
		problem string
	}{
		{"event data edited", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			evs, _ := f.Events(ctx, host.EventFilter{Type: host.EventTaskClaimed})
			return evs[0].Seq, []string{`UPDATE runtime_events SET data = '{"runner_id":"mallory","attempt":1,"max_attempts":3}' WHERE seq = ` + itoa(evs[0].Seq)}
		}, host.BreakEventHash},
		{"event type edited", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return 2, []string{`UPDATE runtime_events SET type = 'task_started' WHERE seq = 2`}
		}, host.BreakEventHash},
		{"event re-hashed by the attacker", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			e, _ := f.Events(ctx, host.EventFilter{AfterSeq: 1, Limit: 1})
			forged := *e[0]
			forged.Data = []byte(`{"forged":true}`)
			// The attempt after it no longer links to it.
			return 3, []string{`UPDATE runtime_events SET data = '{"forged":true}', hash = '` + evidence.HashEvent(&forged) + `' WHERE seq = 2`}
		}, host.BreakPrevHash},
		{"event re-hashed before an event", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			e, _ := f.Events(ctx, host.EventFilter{AfterSeq: 4, Limit: 1})
			forged := *e[0]
			forged.Data = []byte(`{"forged":true}`)
			return 6, []string{`UPDATE runtime_events SET data = '{"forged":true}', hash = '` + evidence.HashEvent(&forged) + `' WHERE seq = 5`}
		}, host.BreakPrevHash},
		{"event deleted", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return 5, []string{`DELETE FROM runtime_events WHERE seq = 4`}
		}, host.BreakSeqGap},
		{"attempt output edited", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, false)}
		}, host.BreakAttemptHash},
		{"attempt output edited and relinked", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			// The entry after it still names the old link.
			return a.EventSeq + 1, []string{recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, true)}
		}, host.BreakPrevHash},
		{"attempt trace edited", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Trace = []byte(`[]`) }, false)}
		}, host.BreakAttemptHash},
		{"attempt stdout edited", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Stdout = []byte{0} }, false)}
		}, host.BreakAttemptHash},
		{"attempt record made unreadable", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{`UPDATE attempt_records SET record = substr(record, 1, 20) WHERE attempt_id = 'att-1'`}
		}, host.BreakAttemptHash},
		{"attempt record byte flipped", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{`UPDATE attempt_records SET record = substr(record, 1, 60) || X'00' || substr(record, 62) WHERE attempt_id = 'att-1'`}
		}, host.BreakAttemptHash},
		{"attempt moved to another task", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq, []string{`UPDATE attempt_records SET task_id = 'task-other' WHERE attempt_id = 'att-1'`}
		}, host.BreakAttemptHash},
		{"attempt deleted", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq + 1, []string{`DELETE FROM attempt_records WHERE attempt_id = 'att-1'`}
		}, host.BreakSeqGap},
		{"attempt inserted behind the chain", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return a.EventSeq + 1, []string{`INSERT INTO attempt_records SELECT seq + 1, 'att-forged', task_id, attempt, tenant, pack, started_at, record, prev_hash, hash FROM attempt_records WHERE attempt_id = 'att-1'`}
		}, host.BreakAttemptUnchain},
		{"attempt inserted out of the chain", func(t *testing.T, f *fixture, a *host.Attempt, _ *host.Artifact) (int64, []string) {
			return 0, []string{`INSERT INTO attempt_records SELECT -7, 'att-forged', task_id, attempt, tenant, pack, started_at, record, prev_hash, hash FROM attempt_records WHERE attempt_id = 'att-1'`}
		}, host.BreakAttemptUnchain},
		{"artifact digest edited", func(t *testing.T, f *fixture, a *host.Attempt, art *host.Artifact) (int64, []string) {
			evs, _ := f.Events(ctx, host.EventFilter{Type: host.EventArtifactRecorded})
			return evs[0].Seq, []string{`UPDATE artifacts SET sha256 = '` + strings.Repeat("0", 64) + `'`}
		}, host.BreakArtifactHash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			a, art := seedEvidence(t, f)
			seq, stmts := tt.edit(t, f, a, art)
			tamper(t, f, stmts...)
			rep, err := f.VerifyChain(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Broken == nil {
				t.Fatalf("tampering not detected: %+v", rep)
			}
			if rep.Broken.Problem != tt.problem || rep.Broken.Seq != seq {
				t.Fatalf("broken = %+v, want problem %s at seq %d", rep.Broken, tt.problem, seq)
			}
			if tt.problem == host.BreakAttemptHash && rep.Broken.AttemptID != "att-1" {
				t.Fatalf("report does not name the attempt: %+v", rep.Broken)
			}
			t.Log(rep.Broken.Detail)
		})
	}
}

func TestEvidenceIsAppendOnly(t *testing.T) {
	f := newFixture(t, Options{})
	seedEvidence(t, f)
	for _, q := range []string{
		`UPDATE runtime_events SET data = '{}' WHERE seq = 1`,
		`DELETE FROM runtime_events WHERE seq = 1`,
		`UPDATE attempt_records SET record = X'00'`,
		`DELETE FROM attempt_records`,
	} {
		if _, err := f.db.Exec(q); err == nil {
			t.Errorf("%s: allowed", q)
		}
	}
}

func TestRecordAttemptIsImmutable(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	before, _ := f.Events(ctx, host.EventFilter{})
	again := *a
	again.ContentHash, again.EventSeq = "", 0
	if err := f.RecordAttempt(ctx, &again); err != nil {
		t.Fatalf("identical re-record: %v", err)
	}
	if again.EventSeq != a.EventSeq {
		t.Fatalf("re-record moved the event: %d vs %d", again.EventSeq, a.EventSeq)
	}
	changed := *a
	changed.Output = json.RawMessage(`{"answer":0}`)
	wantErr(t, f.RecordAttempt(ctx, &changed), host.ErrConflict)
	after, _ := f.Events(ctx, host.EventFilter{})
	if len(after) != len(before) {
		t.Fatalf("events appended by refused or repeated records: %d → %d", len(before), len(after))
	}
}

func TestRecordAttemptValidation(t *testing.T) {
	f := newFixture(t, Options{})
	tests := []struct {
		name  string
		a     host.Attempt
		field string
	}{
		{"outcome", host.Attempt{Outcome: "done"}, "outcome"},
		{"output JSON", host.Attempt{Outcome: abi.Completed, Output: json.RawMessage(`{`)}, "output"},
		{"exit status", host.Attempt{Outcome: abi.Completed, ExitStatus: "crashed"}, "exit_status"},
		{"retry class", host.Attempt{Outcome: abi.Failed, RetryClass: "maybe"}, "retry_class"},
		{"trace JSON", host.Attempt{Outcome: abi.Completed, Trace: json.RawMessage(`[1,`)}, "trace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.RecordAttempt(ctx, &tt.a)
			wantErr(t, err, host.ErrValidation)
			if he := err.(*host.Error); he.Field != tt.field {
				t.Fatalf("field %q, want %q (%v)", he.Field, tt.field, err)
			}
		})
	}
	a := host.Attempt{Outcome: abi.Failed}
	if err := f.RecordAttempt(ctx, &a); err != nil {
		t.Fatal(err)
	}
	if a.AttemptID == "" || a.Tenant != "default" || a.ExitStatus != host.ExitError || a.RetryClass != host.RetryNone || a.Attempt != 0 {
		t.Fatalf("defaults: %+v", a)
	}
}

func TestArtifacts(t *testing.T) {
	f := newFixture(t, Options{MaxArtifactBytes: 1024})
	in := host.ArtifactInput{TaskID: "t1", AttemptID: "a1", Role: host.RolePlan, Name: "plan.md", Data: []byte("plan")}
	art, err := f.PutArtifact(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte("plan")); art.SHA256 != hex.EncodeToString(sum[:]) || art.Size != 4 || art.RelativePath != "plan.md" {
		t.Fatalf("record: %+v", art)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(f.path), "artifacts", "sha256", art.SHA256)); err != nil {
		t.Fatalf("blob not under the default blob dir: %v", err)
	}
	b, err := f.ArtifactContent(ctx, art.ArtifactID)
	if err != nil || string(b) != "plan" {
		t.Fatalf("%q %v", b, err)
	}
	same, err := f.PutArtifact(ctx, in)
	if err != nil || same.ArtifactID != art.ArtifactID {
		t.Fatalf("idempotent put: %v %+v", err, same)
	}
	in.Data = []byte("other")
	_, err = f.PutArtifact(ctx, in)
	wantErr(t, err, host.ErrConflict)

	bad := []struct {
		name string
		in   host.ArtifactInput
		kind error
	}{
		{"no owner", host.ArtifactInput{Role: host.RolePlan, Name: "x"}, host.ErrValidation},
		{"role", host.ArtifactInput{TaskID: "t", Role: "notes", Name: "x"}, host.ErrValidation},
		{"absolute", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "/etc/passwd"}, host.ErrValidation},
		{"dotdot", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "../x"}, host.ErrValidation},
		{"unclean", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "a//b"}, host.ErrValidation},
		{"too large", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "big", Data: make([]byte, 1025)}, host.ErrTooLarge},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.PutArtifact(ctx, tt.in)
			wantErr(t, err, tt.kind)
		})
	}
	// A blob whose bytes changed on disk is refused on read.
	if err := writeFile(f.blobPath(art.SHA256), []byte("PLAN")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ArtifactContent(ctx, art.ArtifactID); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted blob read: %v", err)
	}
}

func TestListAttemptsAndEvents(t *testing.T) {
	f := newFixture(t, Options{})
	for i, pack := range []string{"local.a@1.0.0", "local.a@2.0.0", "local.b@1.0.0"} {
		a := &host.Attempt{TaskID: "t" + itoa(int64(i%2)), Pack: pack, Outcome: abi.Completed, StartedAt: f.clock.Add(1e9)}
		if err := f.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		f    host.AttemptFilter
		want int
	}{
		{host.AttemptFilter{}, 3},
		{host.AttemptFilter{Pack: "local.a"}, 2},
		{host.AttemptFilter{Pack: "local.a@2.0.0"}, 1},
		{host.AttemptFilter{TaskID: "t0"}, 2},
		{host.AttemptFilter{Limit: 1}, 1},
		{host.AttemptFilter{Since: f.clock.Now()}, 1},
	}
	for _, tt := range tests {
		got, err := f.ListAttempts(ctx, tt.f)
		if err != nil || len(got) != tt.want {
			t.Errorf("%+v: %d attempts, want %d (%v)", tt.f, len(got), tt.want, err)
		}
	}
	all, _ := f.ListAttempts(ctx, host.AttemptFilter{})
	if all[0].Pack != "local.b@1.0.0" {
		t.Error("not newest first")
	}
	_, err := f.AppendEvent(ctx, host.Event{Type: "Bad Type"})
	wantErr(t, err, host.ErrValidation)
	_, err = f.AppendEvent(ctx, host.Event{Type: "ok", Data: json.RawMessage(`{`)})
	wantErr(t, err, host.ErrValidation)
	evs, _ := f.Events(ctx, host.EventFilter{Type: host.EventAttemptRecorded, AfterSeq: 1})
	if len(evs) != 2 || evs[0].Seq != 2 {
		t.Fatalf("filtered events: %d", len(evs))
	}
}

// VerifyAttempt checks one attempt against the event that recorded it,
// without walking the chain: what replay relies on before it replays.
func TestVerifyAttempt(t *testing.T) {
	f := newFixture(t, Options{})
	a, _ := seedEvidence(t, f)
	if err := f.VerifyAttempt(ctx, a.AttemptID); err != nil {
		t.Fatalf("intact attempt: %v", err)
	}
	if err := f.VerifyAttempt(ctx, "nope"); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("unknown attempt: %v", err)
	}
	for _, tc := range []struct {
		name, problem string
		sql           func(f *fixture) string
	}{
		{"output edited", host.BreakAttemptHash, func(f *fixture) string {
			return recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, false)
		}},
		// The entry after it then no longer links to it.
		{"output edited and relinked", host.BreakAttemptHash, func(f *fixture) string {
			return recordEdit(t, f, "att-1", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, true)
		}},
		{"column edited", host.BreakAttemptHash, func(*fixture) string { return `UPDATE attempt_records SET tenant = 'other'` }},
		{"moved out of the chain", host.BreakAttemptUnchain, func(*fixture) string { return `UPDATE attempt_records SET seq = -1` }},
		{"moved onto an event", host.BreakAttemptUnchain, func(*fixture) string { return `UPDATE attempt_records SET seq = seq + 1` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			a, _ := seedEvidence(t, f)
			tamper(t, f, tc.sql(f))
			err := f.VerifyAttempt(ctx, a.AttemptID)
			brk, ok := errors.AsType[*host.ChainBreak](err)
			if !ok || !errors.Is(err, host.ErrTampered) || brk.Problem != tc.problem || brk.AttemptID != a.AttemptID {
				t.Fatalf("got %v (%+v), want a %s break naming %s", err, brk, tc.problem, a.AttemptID)
			}
			// Read as a stream, the attempt comes with the same break.
			n := 0
			if err := f.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(got *host.Attempt, verr error) error {
				n++
				if got.AttemptID != a.AttemptID || verr == nil || verr.Error() != err.Error() {
					t.Errorf("streamed %s with %v, want %s with %v", got.AttemptID, verr, a.AttemptID, err)
				}
				return nil
			}); err != nil || n != 1 {
				t.Fatalf("EachVerifiedAttempt: %v after %d", err, n)
			}
		})
	}
}

// EachVerifiedAttempt reads pages (here of 2) through attempts outside the
// chain too (negative seqs), each once, newest first, each with its check.
func TestEachVerifiedAttemptPages(t *testing.T) {
	defer func(n int) { storecore.VerifyPageSize = n }(storecore.VerifyPageSize)
	storecore.VerifyPageSize = 2
	f := newFixture(t, Options{})
	for i := range 5 {
		a := &host.Attempt{AttemptID: fmt.Sprintf("att-%d", i), Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "n",
			RunID: "r", Attempt: 1, ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Outcome: abi.Completed}
		if err := f.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	tamper(t, f, `UPDATE attempt_records SET seq = -1 WHERE attempt_id = 'att-1'`, `UPDATE attempt_records SET seq = -2 WHERE attempt_id = 'att-0'`)
	var seen []string
	err := f.EachVerifiedAttempt(ctx, host.AttemptFilter{Pack: "local.demo"}, func(a *host.Attempt, verr error) error {
		brk, _ := errors.AsType[*host.ChainBreak](verr)
		switch {
		case a.AttemptID == "att-0" || a.AttemptID == "att-1":
			if brk == nil || brk.Problem != host.BreakAttemptUnchain {
				t.Errorf("%s: %v, want it unchained", a.AttemptID, verr)
			}
		case a.AttemptID == "att-2": // the entry before it was moved
			if brk == nil || brk.Problem != host.BreakSeqGap {
				t.Errorf("%s: %v, want a gap before it", a.AttemptID, verr)
			}
		case verr != nil:
			t.Errorf("%s: %v", a.AttemptID, verr)
		}
		seen = append(seen, a.AttemptID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "att-4,att-3,att-2,att-1,att-0" {
		t.Fatalf("read %v", seen)
	}
	stop := errors.New("stop")
	if err := f.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(*host.Attempt, error) error { return stop }); err != stop {
		t.Fatalf("fn's error: %v", err)
	}
}

// A page of adjacent attempts is checked with the links of the whole page
// read at once: each attempt streams with the break VerifyAttempt names
// for it alone (or none), whichever of its neighbours was tampered with.
func TestEachVerifiedAttemptMatchesVerifyAttempt(t *testing.T) {
	for _, tc := range []struct {
		name string
		sql  func(f *fixture) string
	}{
		{"intact", func(*fixture) string { return `SELECT 1` }},
		{"output edited", func(f *fixture) string {
			return recordEdit(t, f, "att-2", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, false)
		}},
		{"output edited and relinked", func(f *fixture) string {
			return recordEdit(t, f, "att-2", func(a *host.Attempt) { a.Output = []byte(`{"answer":43}`) }, true)
		}},
		{"column edited", func(*fixture) string { return `UPDATE attempt_records SET tenant = 'other' WHERE attempt_id = 'att-2'` }},
		{"removed", func(*fixture) string { return `DELETE FROM attempt_records WHERE attempt_id = 'att-2'` }},
		{"moved onto an event", func(*fixture) string {
			return `UPDATE attempt_records SET seq = (SELECT max(seq) FROM runtime_events) WHERE attempt_id = 'att-4'`
		}},
		{"last relinked", func(*fixture) string { return `UPDATE attempt_records SET hash = prev_hash WHERE attempt_id = 'att-4'` }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			for i := range 5 {
				a := &host.Attempt{AttemptID: fmt.Sprintf("att-%d", i), Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "n",
					RunID: "r", Attempt: 1, ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Outcome: abi.Completed}
				if err := f.RecordAttempt(ctx, a); err != nil {
					t.Fatal(err)
				}
				if i == 3 {
					if _, err := f.AppendEvent(ctx, host.Event{Type: "custom.note", Data: json.RawMessage(`{}`)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			tamper(t, f, tc.sql(f))
			broken := 0
			if err := f.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(got *host.Attempt, verr error) error {
				want := f.VerifyAttempt(ctx, got.AttemptID)
				if fmt.Sprint(verr) != fmt.Sprint(want) {
					t.Errorf("%s streamed with %v, VerifyAttempt says %v", got.AttemptID, verr, want)
				}
				if verr != nil {
					broken++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if (broken == 0) != (tc.name == "intact") {
				t.Fatalf("%d attempts broken", broken)
			}
		})
	}
}

// Attempts are read a page at a time with BeforeSeq; CountAttempts counts
// what the same filter selects.
func TestAttemptPages(t *testing.T) {
	f := newFixture(t, Options{})
	for i := range 7 {
		a := &host.Attempt{AttemptID: fmt.Sprintf("att-%d", i), Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "n",
			RunID: "r", Attempt: 1, ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Outcome: abi.Completed}
		if err := f.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	filter := host.AttemptFilter{Pack: "local.demo", Limit: 3}
	for {
		page, err := f.ListAttempts(ctx, filter)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			seen = append(seen, a.AttemptID)
		}
		if len(page) < filter.Limit {
			break
		}
		filter.BeforeSeq = page[len(page)-1].EventSeq
	}
	if strings.Join(seen, ",") != "att-6,att-5,att-4,att-3,att-2,att-1,att-0" {
		t.Fatalf("pages: %v", seen)
	}
	if n, err := f.CountAttempts(ctx, host.AttemptFilter{Pack: "local.demo", Limit: 1}); err != nil || n != 7 {
		t.Fatalf("count = %d, %v", n, err)
	}
	if n, err := f.CountAttempts(ctx, host.AttemptFilter{Pack: "local.other"}); err != nil || n != 0 {
		t.Fatalf("count of another pack = %d, %v", n, err)
	}
}

// A write is acknowledged only once the WAL is synced; an fsync that fails
// fails the writes it was to make durable and every write after it.
func TestSyncFailureRefusesWrites(t *testing.T) {
	f := newFixture(t, Options{})
	if _, err := f.AppendEvent(ctx, host.Event{Type: "custom.before"}); err != nil {
		t.Fatal(err)
	}
	// The next fsync fails (the file it would sync is gone from reach).
	f.w.syncq <- committed{} // wait until sync is idle: it takes this first
	f.w.wal.Close()
	_, err := f.AppendEvent(ctx, host.Event{Type: "custom.after"})
	if err == nil || !strings.Contains(err.Error(), "sync the database to disk") {
		t.Fatalf("write after a failed fsync: %v", err)
	}
	if err := f.RecordAttempt(ctx, &host.Attempt{Outcome: abi.Completed}); err == nil || !strings.Contains(err.Error(), "refuses writes until it is opened again") {
		t.Fatalf("later write: %v", err)
	}
}
