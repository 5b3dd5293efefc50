package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// Evidence checks host.Evidence: recording attempts (defaults,
// validation, immutability), artifacts, listing and counting attempts,
// appending and filtering events, checking one attempt, exporting a
// bundle that verifies offline, and the chain itself: every event hashed
// as internal/evidence hashes it, linked to the entry before it, and the
// report's counts, and the head anchored outside the database (a signed
// checkpoint VerifyChain reports).
func Evidence(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"RecordAttempt", evidenceRecordAttempt},
		{"RecordAttemptValidation", evidenceRecordAttemptValidation},
		{"RecordAttemptImmutable", evidenceRecordAttemptImmutable},
		{"Artifacts", evidenceArtifacts},
		{"ListAndCountAttempts", evidenceListAndCountAttempts},
		{"AttemptPages", evidenceAttemptPages},
		{"AppendEventAndFilters", evidenceAppendEventAndFilters},
		{"EventsByTenantAndSince", evidenceEventsByTenantAndSince},
		{"EventsOfTenantsTiedToNoTask", evidenceEventsOfTenantsTiedToNoTask},
		{"VerifyAttempt", evidenceVerifyAttempt},
		{"ExportAttempt", evidenceExportAttempt},
		{"ChainReport", evidenceChainReport},
		{"HeadAnchored", evidenceHeadAnchored},
		{"ConcurrentWrites", evidenceConcurrentWrites},
		{"DefaultLimits", evidenceDefaultLimits},
		{"AuditRidesWithItsWrite", evidenceAuditRidesWithItsWrite},
	})
}

// evidenceAuditRidesWithItsWrite: a context carrying a host.Audit for an
// attempt has RecordAttempt append it right after the attempt, in the same
// transaction, naming the attempt and its task; one for a task has Enqueue
// do the same. Each is appended once, and the write it is not for leaves
// it alone.
func evidenceAuditRidesWithItsWrite(f *fixture) {
	t := f.t
	data := map[string]string{"route": "POST /v1/x", "tenant": "acme", "token_id": "tok-1"}
	au := &host.Audit{Type: "api_call", Data: data, Of: host.AuditTask}
	actx := host.WithAudit(ctx, au)
	a := host.Attempt{Node: "n", Outcome: abi.Completed, Tenant: "acme"}
	if err := f.b.RecordAttempt(actx, &a); err != nil || au.Written() {
		t.Fatalf("an attempt took a task's audit: %v %v", err, au.Written())
	}
	task, err := f.b.Enqueue(actx, intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	if err != nil || !au.Written() {
		t.Fatalf("enqueue with an audit: %v, written %v", err, au.Written())
	}
	if _, err := f.b.Enqueue(actx, intent("demo", nil), host.EnqueueOptions{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	aa := &host.Audit{Type: "api_call", Data: data, Of: host.AuditAttempt}
	b := host.Attempt{Node: "n", Outcome: abi.Completed, Tenant: "acme", TaskID: task.TaskID}
	if err := f.b.RecordAttempt(host.WithAudit(ctx, aa), &b); err != nil || !aa.Written() {
		t.Fatalf("attempt with an audit: %v, written %v", err, aa.Written())
	}
	evs, err := f.b.Events(ctx, host.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var calls []*host.Event
	for i, e := range evs {
		if e.Type != "api_call" {
			continue
		}
		calls = append(calls, e)
		prev := evs[i-1]
		if e.Seq != prev.Seq+1 {
			t.Errorf("api_call %+v after %+v", e, prev)
		}
		switch prev.Type {
		case host.EventTaskEnqueued:
			if e.TaskID != task.TaskID || prev.TaskID != task.TaskID {
				t.Errorf("the task's audit %+v names another task than %s", e, task.TaskID)
			}
		case host.EventAttemptRecorded:
			if e.AttemptID != b.AttemptID || e.TaskID != task.TaskID {
				t.Errorf("the attempt's audit %+v, want attempt %s of task %s", e, b.AttemptID, task.TaskID)
			}
		default:
			t.Errorf("api_call after %s", prev.Type)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("%d api_call events, want one per audit", len(calls))
	}
}

// seedEvidence runs one task to completion with a full attempt, an
// artifact and a custom event, and returns the attempt and the artifact.
func (f *fixture) seedEvidence() (*host.Attempt, *host.Artifact) {
	f.t.Helper()
	f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	task := f.claim()
	a := &host.Attempt{
		AttemptID: "att-1", TaskID: task.TaskID, Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "demo.node",
		Tenant: "acme", RunID: "run-1", Attempt: 1, ABIVersion: "1.0",
		Input: json.RawMessage(`{ "q": "<hi>" }`), Output: json.RawMessage(`{"answer": 42}`), Outcome: abi.Completed,
		Stdout: []byte("hello\n"), Stderr: []byte{0xff, 0x00}, Logs: json.RawMessage(`[{"level":"info","message":"m"}]`),
		Events: json.RawMessage(`[{"type":"cap.breached","kind":"host-calls","limit":1,"observed":2}]`),
		Trace:  json.RawMessage(`[{"fn":"openwop_random","result":"AAEC"},{"fn":"memory_get","status":0,"result":{"v":1}}]`),
		Limits: json.RawMessage(`{"memoryBytes":1048576}`), AdapterCalls: json.RawMessage(`[{"adapter":"http","status":200}]`),
		Error:     &abi.Error{Code: "x", Message: "a & b", Details: json.RawMessage(`{"k": [1, 2]}`)},
		StartedAt: f.clock.Now(), EndedAt: f.clock.Add(250 * time.Millisecond),
	}
	if err := f.b.RecordAttempt(ctx, a); err != nil {
		f.t.Fatal(err)
	}
	art, err := f.b.PutArtifact(ctx, host.ArtifactInput{TaskID: task.TaskID, AttemptID: a.AttemptID, Role: host.RoleOutput,
		Name: "out/report.md", ContentType: "text/markdown", Data: []byte("# report\n")})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: task.TaskID, Data: json.RawMessage(`{"note":"x"}`)}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		f.t.Fatal(err)
	}
	return a, art
}

func evidenceRecordAttempt(f *fixture) {
	t := f.t
	a := host.Attempt{Outcome: abi.Failed}
	if err := f.b.RecordAttempt(ctx, &a); err != nil {
		t.Fatal(err)
	}
	if a.AttemptID == "" || a.Tenant != host.DefaultTenant || a.ExitStatus != host.ExitError || a.RetryClass != host.RetryNone ||
		a.Attempt != 0 || a.ContentHash == "" || a.EventSeq == 0 {
		t.Fatalf("defaults: %+v", a)
	}
	ok := host.Attempt{Outcome: abi.Completed}
	if err := f.b.RecordAttempt(ctx, &ok); err != nil || ok.ExitStatus != host.ExitOK || ok.AttemptID == a.AttemptID {
		t.Fatalf("completed attempt: %v %+v", err, ok)
	}

	full, _ := f.seedEvidence()
	got, err := f.b.Attempt(ctx, full.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	// JSON is stored compacted (HTML-significant characters kept as
	// escapes), bytes as given, and the content hash still holds.
	if evidence.HashAttempt(got) != full.ContentHash || got.ContentHash != full.ContentHash || got.EventSeq != full.EventSeq ||
		string(got.Input) != `{"q":"\u003chi\u003e"}` || string(got.Output) != `{"answer":42}` || !bytes.Equal(got.Stderr, []byte{0xff, 0}) ||
		string(got.Error.Details) != `{"k":[1,2]}` || got.Tenant != "acme" || !got.StartedAt.Equal(full.StartedAt) || !got.EndedAt.Equal(full.EndedAt) {
		t.Fatalf("attempt did not round-trip: %+v", got)
	}
	evs := f.events(host.EventFilter{AttemptID: full.AttemptID, Type: host.EventAttemptRecorded})
	if len(evs) != 1 || evs[0].Seq != full.EventSeq || evs[0].TaskID != full.TaskID {
		t.Fatalf("attempt_recorded events %+v", evs)
	}
	if d := eventData(t, evs[0]); d["content_hash"] != full.ContentHash {
		t.Fatalf("attempt_recorded data %s, want content_hash %s", evs[0].Data, full.ContentHash)
	}
	_, err = f.b.Attempt(ctx, "att-nope")
	wantErr(t, err, host.ErrNotFound)
}

func evidenceRecordAttemptValidation(f *fixture) {
	t := f.t
	for _, tt := range []struct {
		a     host.Attempt
		field string
	}{
		{host.Attempt{Outcome: "done"}, "outcome"},
		{host.Attempt{Outcome: abi.Completed, Output: json.RawMessage(`{`)}, "output"},
		{host.Attempt{Outcome: abi.Completed, ExitStatus: "crashed"}, "exit_status"},
		{host.Attempt{Outcome: abi.Failed, RetryClass: "maybe"}, "retry_class"},
		{host.Attempt{Outcome: abi.Completed, Trace: json.RawMessage(`[1,`)}, "trace"},
	} {
		wantField(t, f.b.RecordAttempt(ctx, &tt.a), tt.field)
	}
	if n, err := f.b.CountAttempts(ctx, host.AttemptFilter{}); err != nil || n != 0 {
		t.Fatalf("refused attempts stored: %d %v", n, err)
	}
	if evs := f.events(host.EventFilter{}); len(evs) != 0 {
		t.Fatalf("refused attempts appended events: %+v", evs)
	}
}

func evidenceRecordAttemptImmutable(f *fixture) {
	t := f.t
	a, _ := f.seedEvidence()
	before := f.events(host.EventFilter{})
	again := *a
	again.ContentHash, again.EventSeq = "", 0
	if err := f.b.RecordAttempt(ctx, &again); err != nil {
		t.Fatalf("identical re-record: %v", err)
	}
	if again.EventSeq != a.EventSeq || again.ContentHash != a.ContentHash {
		t.Fatalf("re-record moved the event: %d vs %d", again.EventSeq, a.EventSeq)
	}
	changed := *a
	changed.Output = json.RawMessage(`{"answer":0}`)
	wantErr(t, f.b.RecordAttempt(ctx, &changed), host.ErrConflict)
	if after := f.events(host.EventFilter{}); len(after) != len(before) {
		t.Fatalf("events appended by refused or repeated records: %d → %d", len(before), len(after))
	}
	if got, _ := f.b.Attempt(ctx, a.AttemptID); string(got.Output) != `{"answer":42}` {
		t.Fatalf("a refused record changed the attempt: %s", got.Output)
	}
}

func evidenceArtifacts(f *fixture) {
	t := f.t
	in := host.ArtifactInput{TaskID: "t1", AttemptID: "a1", Role: host.RolePlan, Name: "plan.md", ContentType: "text/markdown", Data: []byte("plan")}
	art, err := f.b.PutArtifact(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("plan"))
	if art.ArtifactID == "" || art.SHA256 != hex.EncodeToString(sum[:]) || art.Size != 4 || art.RelativePath != "plan.md" || art.Role != host.RolePlan ||
		art.TaskID != "t1" || art.AttemptID != "a1" || art.ContentType != "text/markdown" || !art.CreatedAt.Equal(f.clock.Now()) || art.VerifiedAt != nil {
		t.Fatalf("record: %+v", art)
	}
	if got, err := f.b.Artifact(ctx, art.ArtifactID); err != nil || !reflect.DeepEqual(got, art) {
		t.Fatalf("stored record differs:\n%+v\n%+v (%v)", got, art, err)
	}
	if b, err := f.b.ArtifactContent(ctx, art.ArtifactID); err != nil || string(b) != "plan" {
		t.Fatalf("content %q %v", b, err)
	}
	evs := f.events(host.EventFilter{Type: host.EventArtifactRecorded})
	if len(evs) != 1 || evs[0].TaskID != "t1" || evs[0].AttemptID != "a1" {
		t.Fatalf("artifact_recorded events %+v", evs)
	}
	if d := eventData(t, evs[0]); d["sha256"] != art.SHA256 || d["size"] != 4.0 {
		t.Fatalf("artifact_recorded data %s", evs[0].Data)
	}
	same, err := f.b.PutArtifact(ctx, in)
	if err != nil || same.ArtifactID != art.ArtifactID {
		t.Fatalf("idempotent put: %v %+v", err, same)
	}
	if n := len(f.events(host.EventFilter{Type: host.EventArtifactRecorded})); n != 1 {
		t.Fatalf("the same artifact again appended an event (%d)", n)
	}
	in.Data = []byte("other")
	_, err = f.b.PutArtifact(ctx, in)
	wantErr(t, err, host.ErrConflict)
	// The same name for another attempt is another artifact.
	in.AttemptID = "a2"
	if other, err := f.b.PutArtifact(ctx, in); err != nil || other.ArtifactID == art.ArtifactID {
		t.Fatalf("another attempt's artifact: %v %+v", err, other)
	}
	for _, tt := range []struct {
		name string
		in   host.ArtifactInput
	}{
		{"no owner", host.ArtifactInput{Role: host.RolePlan, Name: "x"}},
		{"role", host.ArtifactInput{TaskID: "t", Role: "notes", Name: "x"}},
		{"absolute", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "/etc/passwd"}},
		{"dotdot", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "../x"}},
		{"unclean", host.ArtifactInput{TaskID: "t", Role: host.RolePlan, Name: "a//b"}},
	} {
		if _, err := f.b.PutArtifact(ctx, tt.in); !errors.Is(err, host.ErrValidation) {
			t.Fatalf("%s: %v, want a validation error", tt.name, err)
		}
	}
	_, err = f.b.Artifact(ctx, "art-nope")
	wantErr(t, err, host.ErrNotFound)
	_, err = f.b.ArtifactContent(ctx, "art-nope")
	wantErr(t, err, host.ErrNotFound)
}

func evidenceListAndCountAttempts(f *fixture) {
	t := f.t
	typed := f.enqueue(intent("typed.work", nil), host.EnqueueOptions{})
	for i, pack := range []string{"local.a@1.0.0", "local.a@2.0.0", "local.b@1.0.0"} {
		a := &host.Attempt{TaskID: "t" + fmt.Sprint(i%2), Pack: pack, Outcome: abi.Completed, Tenant: []string{"", "acme", ""}[i], StartedAt: f.clock.Add(time.Second)}
		if err := f.b.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	f.clock.Add(time.Second)
	task := f.claim()
	f.finish(task, host.FinishInput{Outcome: okOutcome()}) // one attempt of typed.work, started now
	for _, tt := range []struct {
		f           host.AttemptFilter
		list, count int // CountAttempts ignores Limit
	}{
		{host.AttemptFilter{}, 4, 4},
		{host.AttemptFilter{Pack: "local.a"}, 2, 2},
		{host.AttemptFilter{Pack: "local.a@2.0.0"}, 1, 1},
		{host.AttemptFilter{TaskID: "t0"}, 2, 2},
		{host.AttemptFilter{TaskID: typed.TaskID}, 1, 1},
		{host.AttemptFilter{TaskType: "typed.work"}, 1, 1},
		{host.AttemptFilter{Tenant: "acme"}, 1, 1},
		{host.AttemptFilter{Tenant: host.DefaultTenant}, 3, 3},
		{host.AttemptFilter{Limit: 1}, 1, 4},
		{host.AttemptFilter{Since: f.clock.Now().Add(-time.Second)}, 2, 2},
	} {
		got, err := f.b.ListAttempts(ctx, tt.f)
		if err != nil || len(got) != tt.list {
			t.Errorf("list %+v: %d attempts, want %d (%v)", tt.f, len(got), tt.list, err)
		}
		if n, err := f.b.CountAttempts(ctx, tt.f); err != nil || n != tt.count {
			t.Errorf("count %+v: %d, want %d (%v)", tt.f, n, tt.count, err)
		}
	}
	all, _ := f.b.ListAttempts(ctx, host.AttemptFilter{})
	if all[0].TaskID != typed.TaskID || all[1].Pack != "local.b@1.0.0" || all[3].Pack != "local.a@1.0.0" {
		t.Error("attempts not listed most recently recorded first")
	}
}

func evidenceAttemptPages(f *fixture) {
	t := f.t
	for i := range 7 {
		a := &host.Attempt{AttemptID: fmt.Sprintf("att-%d", i), Pack: "local.demo@1.0.0", ModuleSHA256: strings.Repeat("ab", 32), Node: "n",
			RunID: "r", Attempt: 1, ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Outcome: abi.Completed}
		if err := f.b.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	filter := host.AttemptFilter{Pack: "local.demo", Limit: 3}
	for {
		page, err := f.b.ListAttempts(ctx, filter)
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
	if n, err := f.b.CountAttempts(ctx, host.AttemptFilter{Pack: "local.demo", Limit: 1}); err != nil || n != 7 {
		t.Fatalf("count = %d, %v", n, err)
	}
	if n, err := f.b.CountAttempts(ctx, host.AttemptFilter{Pack: "local.other"}); err != nil || n != 0 {
		t.Fatalf("count of another pack = %d, %v", n, err)
	}
	// EachVerifiedAttempt streams the same attempts, each verified.
	seen = nil
	err := f.b.EachVerifiedAttempt(ctx, host.AttemptFilter{Pack: "local.demo", Limit: 2}, func(a *host.Attempt, verr error) error {
		if verr != nil {
			t.Errorf("%s: %v", a.AttemptID, verr)
		}
		seen = append(seen, a.AttemptID)
		return nil
	})
	if err != nil || strings.Join(seen, ",") != "att-6,att-5,att-4,att-3,att-2,att-1,att-0" {
		t.Fatalf("EachVerifiedAttempt: %v %v", seen, err)
	}
	stop := errors.New("stop")
	n := 0
	if err := f.b.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(*host.Attempt, error) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn's error: %v after %d calls", err, n)
	}
}

func evidenceAppendEventAndFilters(f *fixture) {
	t := f.t
	e, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: "t1", AttemptID: "a1", Data: json.RawMessage(`{ "b": 1, "a": [ 2 ] }`)})
	if err != nil {
		t.Fatal(err)
	}
	if e.Seq == 0 || !e.Time.Equal(f.clock.Now()) || e.Hash == "" || e.PrevHash != evidence.GenesisHash || e.Hash != evidence.HashEvent(e) {
		t.Fatalf("appended %+v", e)
	}
	for _, bad := range []host.Event{{Type: "Bad Type"}, {Type: ""}, {Type: "ok", Data: json.RawMessage(`{`)}} {
		_, err := f.b.AppendEvent(ctx, bad)
		wantErr(t, err, host.ErrValidation)
	}
	for i := range 4 {
		f.clock.Add(time.Second)
		if _, err := f.b.AppendEvent(ctx, host.Event{Type: []string{"custom.a", "custom.b"}[i%2], TaskID: "t" + fmt.Sprint(i%2)}); err != nil {
			t.Fatal(err)
		}
	}
	all := f.events(host.EventFilter{})
	if len(all) != 5 || all[0].Seq != e.Seq || string(all[0].Data) != string(e.Data) {
		t.Fatalf("events %+v", all)
	}
	for _, tt := range []struct {
		name   string
		filter host.EventFilter
		want   int
	}{
		{"type", host.EventFilter{Type: "custom.a"}, 2},
		{"task", host.EventFilter{TaskID: "t1"}, 3},
		{"attempt", host.EventFilter{AttemptID: "a1"}, 1},
		{"after seq", host.EventFilter{AfterSeq: all[1].Seq}, 3},
		{"limit", host.EventFilter{Limit: 2}, 2},
		{"after seq and limit", host.EventFilter{AfterSeq: all[0].Seq, Limit: 2}, 2},
		{"task and type", host.EventFilter{TaskID: "t1", Type: "custom.b"}, 2},
	} {
		got := f.events(tt.filter)
		if len(got) != tt.want {
			t.Fatalf("%s: %d events, want %d", tt.name, len(got), tt.want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].Seq <= got[i-1].Seq {
				t.Fatalf("%s: not in chain order", tt.name)
			}
		}
	}
	if page := f.events(host.EventFilter{AfterSeq: all[0].Seq, Limit: 2}); page[0].Seq != all[1].Seq || page[1].Seq != all[2].Seq {
		t.Fatal("AfterSeq does not page on from the given seq")
	}
}

func evidenceEventsByTenantAndSince(f *fixture) {
	t := f.t
	mine := f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	f.clock.Add(time.Minute)
	theirs := f.enqueue(intent("demo", nil), host.EnqueueOptions{Tenant: "other"})
	if _, err := f.b.AcquireDispatchLock(ctx, "r1", time.Minute); err != nil {
		t.Fatal(err)
	}
	task := f.claim()
	if task.TaskID != mine.TaskID {
		t.Fatalf("claimed %s", task.TaskID)
	}
	if _, err := f.b.Finish(ctx, task.TaskID, host.FinishInput{Record: newAttempt(task), Outcome: okOutcome()}); err != nil {
		t.Fatal(err)
	}
	tasksOf := func(evs []*host.Event) map[string]bool {
		m := map[string]bool{}
		for _, e := range evs {
			m[e.TaskID] = true
		}
		return m
	}
	evs := f.events(host.EventFilter{Tenant: "acme"})
	if got := tasksOf(evs); !reflect.DeepEqual(got, map[string]bool{mine.TaskID: true}) {
		t.Fatalf("tenant acme sees the events of %v", got)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	f.wantTypes("tenant acme", types, "task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished")
	// dispatch_locked is the host's, no tenant's: listed without a
	// tenant only.
	if got := tasksOf(f.events(host.EventFilter{})); !reflect.DeepEqual(got, map[string]bool{mine.TaskID: true, theirs.TaskID: true, "": true}) {
		t.Fatalf("every event: the tasks %v", got)
	}
	if evs := f.events(host.EventFilter{Tenant: "other"}); len(evs) != 1 || evs[0].TaskID != theirs.TaskID {
		t.Fatalf("tenant other: %v", evs)
	}
	if evs := f.events(host.EventFilter{Tenant: "nobody"}); len(evs) != 0 {
		t.Fatalf("tenant nobody: %v", evs)
	}
	// Since starts at the chain's position at that time.
	all := f.events(host.EventFilter{})
	since := f.events(host.EventFilter{Since: f.clock.Now()})
	if len(since) != len(all)-1 || since[0].Seq != all[1].Seq {
		t.Fatalf("since the second enqueue: %d of %d events, first %+v", len(since), len(all), since[0])
	}
	if evs := f.events(host.EventFilter{Since: f.clock.Now().Add(time.Second)}); len(evs) != 0 {
		t.Fatalf("since later: %v", evs)
	}
	page := f.events(host.EventFilter{Since: f.clock.Now(), AfterSeq: since[2].Seq, Limit: 2})
	if len(page) != 2 || page[0].Seq != since[3].Seq {
		t.Fatalf("page: %v", page)
	}
}

func evidenceVerifyAttempt(f *fixture) {
	t := f.t
	a, _ := f.seedEvidence()
	if err := f.b.VerifyAttempt(ctx, a.AttemptID); err != nil {
		t.Fatalf("intact attempt: %v", err)
	}
	wantErr(t, f.b.VerifyAttempt(ctx, "nope"), host.ErrNotFound)
	n := 0
	err := f.b.EachVerifiedAttempt(ctx, host.AttemptFilter{TaskID: a.TaskID}, func(got *host.Attempt, verr error) error {
		n++
		if got.AttemptID != a.AttemptID || verr != nil || got.ContentHash != a.ContentHash {
			t.Errorf("streamed %+v with %v", got, verr)
		}
		return nil
	})
	if err != nil || n != 1 {
		t.Fatalf("EachVerifiedAttempt: %v after %d", err, n)
	}
}

func evidenceExportAttempt(f *fixture) {
	t := f.t
	a, art := f.seedEvidence()
	b, err := f.b.ExportAttempt(ctx, a.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if b.Format != host.BundleFormat || b.Attempt == nil || b.Attempt.AttemptID != a.AttemptID {
		t.Fatalf("bundle %+v", b)
	}
	if err := evidence.VerifyBundle(b); err != nil {
		t.Fatal(err)
	}
	if len(b.Artifacts) != 1 || b.Artifacts[0].ArtifactID != art.ArtifactID || string(b.Artifacts[0].Content) != "# report\n" {
		t.Fatalf("artifacts: %+v", b.Artifacts)
	}
	types := map[string]bool{}
	for _, e := range b.Events {
		types[e.Type] = true
	}
	for _, want := range []string{host.EventAttemptRecorded, host.EventArtifactRecorded, host.EventTaskAttemptFinished} {
		if !types[want] {
			t.Errorf("bundle lacks %s", want)
		}
	}
	if string(b.Attempt.Trace) != string(a.Trace) {
		t.Fatal("trace not exported as recorded")
	}
	// The bundle survives JSON, compact or indented.
	for _, enc := range []func(any) ([]byte, error){json.Marshal, func(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }} {
		raw, err := enc(b)
		if err != nil {
			t.Fatal(err)
		}
		var back host.Bundle
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		if err := evidence.VerifyBundle(&back); err != nil {
			t.Fatalf("after a JSON round trip: %v", err)
		}
		back.Attempt.Output = json.RawMessage(`{"answer":41}`)
		if err := evidence.VerifyBundle(&back); err == nil {
			t.Fatal("an edited bundle verified")
		}
	}
	_, err = f.b.ExportAttempt(ctx, "nope")
	wantErr(t, err, host.ErrNotFound)
}

// checkEvents checks every event of the chain: numbered from 1 without a
// gap, the first linked to the genesis hash and each next one to the one
// before, each hashed as internal/evidence hashes it (an attempt_recorded
// event is its attempt's link: evidence.LinkAttempt of its content hash).
func (f *fixture) checkEvents() []*host.Event {
	f.t.Helper()
	evs := f.events(host.EventFilter{Limit: 100000})
	prev := evidence.GenesisHash
	for i, e := range evs {
		want := evidence.HashEvent(e)
		if e.Type == host.EventAttemptRecorded {
			want = evidence.LinkAttempt(e.Seq, e.PrevHash, fmt.Sprint(eventData(f.t, e)["content_hash"]))
		}
		switch {
		case e.Seq != int64(i+1):
			f.t.Fatalf("event %d is number %d in the chain", e.Seq, i+1)
		case e.PrevHash != prev:
			f.t.Fatalf("event %d (%s) links to %s, want %s", e.Seq, e.Type, e.PrevHash, prev)
		case e.Hash != want:
			f.t.Fatalf("event %d (%s): hash %s, want %s", e.Seq, e.Type, e.Hash, want)
		}
		prev = e.Hash
	}
	return evs
}

func evidenceChainReport(f *fixture) {
	t := f.t
	if rep := f.verifyChain(); rep.Events != 0 || rep.Attempts != 0 {
		t.Fatalf("empty store: %+v", rep)
	}
	f.seedEvidence()
	f.enqueue(intent("demo", nil), host.EnqueueOptions{})
	f.finish(f.claim(), host.FinishInput{Outcome: okOutcome()})
	evs := f.checkEvents()
	rep := f.verifyChain()
	last := evs[len(evs)-1]
	if rep.Attempts != 2 || rep.Artifacts != 1 || rep.Events != int64(len(evs)) || rep.Head != last.Hash || rep.HeadSeq != last.Seq {
		t.Fatalf("report %+v after %d events (last %d %s)", rep, len(evs), last.Seq, last.Hash)
	}
}

// The store anchors the head it committed outside the database (a signed
// checkpoint: internal/evidence's Anchor), while it runs, without waiting
// for Close; VerifyChain reports the head checked against it. What a
// checkpoint catches needs tampering with the database: each backend's
// own tests.
func evidenceHeadAnchored(f *fixture) {
	t := f.t
	f.seedEvidence()
	e, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.note", Data: json.RawMessage(`{"last":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	f.waitAnchored(f.b, func(cp *host.ChainHead) bool { return cp.Seq == e.Seq && cp.Hash == e.Hash })
}

// waitAnchored waits, up to 5 s, for b's chain report to name a
// checkpoint that ok accepts, and fails the test if it never does or the
// chain does not verify.
func (f *fixture) waitAnchored(b host.Backend, ok func(*host.ChainHead) bool) *host.ChainReport {
	f.t.Helper()
	var rep *host.ChainReport
	for range 500 {
		var err error
		if rep, err = b.VerifyChain(ctx); err != nil {
			f.t.Fatal(err)
		}
		if !rep.OK {
			f.t.Fatalf("VerifyChain: not OK: %+v (broken %+v)", rep, rep.Broken)
		}
		if rep.Checkpoint != nil && ok(rep.Checkpoint) {
			return rep
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("no checkpoint anchoring the head within 5s: %+v, checkpoint %+v", rep, rep.Checkpoint)
	return nil
}

// Writers appending to the chain at once (tasks, events, attempts,
// artifacts) leave one chain: every entry numbered, linked and hashed
// (checked after the scenario), none lost.
func evidenceConcurrentWrites(f *fixture) {
	t := f.t
	const writers, each = 4, 12
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				var err error
				switch i % 4 {
				case 0:
					_, err = f.b.Enqueue(ctx, intent("demo", nil), host.EnqueueOptions{Tenant: fmt.Sprint("t", w)})
				case 1:
					_, err = f.b.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: id})
				case 2:
					err = f.b.RecordAttempt(ctx, &host.Attempt{AttemptID: id, TaskID: id, Outcome: abi.Completed})
				case 3:
					_, err = f.b.PutArtifact(ctx, host.ArtifactInput{TaskID: id, Role: host.RoleOutput, Name: "out.txt", Data: []byte(id)})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	evs := f.checkEvents()
	rep := f.verifyChain()
	quarter := int64(writers * each / 4)
	if int64(len(evs)) != 4*quarter || rep.Events != 4*quarter || rep.Attempts != quarter || rep.Artifacts != quarter {
		t.Fatalf("%d events, report %+v; want %d entries, %d attempts and artifacts", len(evs), rep, 4*quarter, quarter)
	}
	if n := len(f.tasks(host.TaskFilter{})); int64(n) != quarter {
		t.Fatalf("%d tasks, want %d", n, quarter)
	}
}

// A filter without a limit reads 1000 events and 100 attempts at most;
// the next page starts after the last one read.
func evidenceDefaultLimits(f *fixture) {
	t := f.t
	for i := range 1001 {
		if _, err := f.b.AppendEvent(ctx, host.Event{Type: "custom.tick", Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}); err != nil {
			t.Fatal(err)
		}
	}
	for range 101 {
		if err := f.b.RecordAttempt(ctx, &host.Attempt{Outcome: abi.Completed}); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := f.b.Events(ctx, host.EventFilter{Type: "custom.tick"})
	if err != nil || len(evs) != 1000 {
		t.Fatalf("%d events (%v), want the first 1000", len(evs), err)
	}
	if rest, err := f.b.Events(ctx, host.EventFilter{Type: "custom.tick", AfterSeq: evs[999].Seq}); err != nil || len(rest) != 1 || eventData(t, rest[0])["i"] != 1000.0 {
		t.Fatalf("the next page: %+v %v", rest, err)
	}
	if as, err := f.b.ListAttempts(ctx, host.AttemptFilter{}); err != nil || len(as) != 100 {
		t.Fatalf("%d attempts (%v), want 100", len(as), err)
	}
	if n, err := f.b.CountAttempts(ctx, host.AttemptFilter{}); err != nil || n != 101 {
		t.Fatalf("count %d %v", n, err)
	}
}
