package packrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/message/messagetest"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// A SQLite home moved into PostgreSQL reads the same through every host
// read: tasks, attempts, events (same seqs and hashes), memory (the
// secret value opened with the home's key), artifacts' bytes, packs and
// their blobs, schedules, sensor events, messages, tokens. The chain
// verifies there and a migrated attempt replays identically; a second
// migration into the now non-empty database is refused and changes
// nothing.
func TestMigrateStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	f := newFixture(t)
	fillHome(t, f)
	want := storeView(t, f.Host)
	homeLog, err := f.EvidenceLog().LogSync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	homeKey, err := f.LogVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}

	rep, err := MigrateStore(ctx, f.home, dsn, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Chain.OK || rep.Chain.Attempts != 2 || rep.Chain.Artifacts != 1 || rep.Chain.Messages != 1 || rep.PackBlobs < 2 || rep.Artifacts != 1 {
		t.Fatalf("report: %+v, chain %+v", rep, rep.Chain)
	}
	counted := map[string]int64{}
	for _, c := range rep.Tables {
		if c.Source != c.Target {
			t.Errorf("table %s: %d rows in the home, %d copied", c.Table, c.Source, c.Target)
		}
		counted[c.Table] = c.Target
	}
	for _, table := range []string{"tasks", "attempt_records", "runtime_events", "artifacts", "memory_entries", "packs", "schedules", "sensor_events", "messages", "api_tokens", "agents", "openwop_runs", "openwop_run_events", "task_type_specs"} {
		if counted[table] == 0 {
			t.Errorf("table %s: nothing copied (%v)", table, counted)
		}
	}

	pg, err := Open(ctx, f.home, Config{Store: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(ctx)
	if got := storeView(t, pg); got != want {
		t.Fatalf("read through PostgreSQL:\n%s\nread through SQLite:\n%s", got, want)
	}
	// The home's signed head checkpoint, written by SQLite, anchors the
	// copied chain on PostgreSQL too (same seqs and hashes, same key).
	if chain, err := pg.VerifyChain(ctx, nil); err != nil || !chain.OK || chain.Head != rep.Chain.Head || chain.Checkpoint == nil || chain.Checkpoint.Seq != chain.HeadSeq {
		t.Fatalf("chain on PostgreSQL: %+v %v", chain, err)
	}
	// The evidence log is not copied but rebuilt from the copied chain:
	// the same tree, signed under the same origin by the same host key.
	pgLog, err := pg.EvidenceLog().LogSync(ctx)
	if err != nil || pgLog.Size != homeLog.Size || !bytes.Equal(pgLog.Root, homeLog.Root) {
		t.Fatalf("log on PostgreSQL: %+v %v; in the home: %+v", pgLog, err, homeLog)
	}
	if _, err := tlog.OpenCheckpoint([]byte(pgLog.Note), homeKey); err != nil {
		t.Fatalf("the PostgreSQL log's checkpoint does not open with the home's key: %v", err)
	}
	sum, err := pg.ReplayAll(ctx, ReplayFilter{}, ReplayOptions{}, nil)
	if err != nil || sum.Total != 2 || sum.Identical != 2 {
		t.Fatalf("replay on PostgreSQL: %+v %v", sum, err)
	}

	_, err = MigrateStore(ctx, f.home, dsn, Config{})
	if !errors.Is(err, host.ErrConflict) || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), "tasks (") {
		t.Fatalf("second migration: %v", err)
	}
	if got := storeView(t, pg); got != want {
		t.Fatalf("the refused migration changed the target:\n%s", got)
	}
}

// A blob file that no longer matches its sha256 (or is missing) is
// refused naming it, and the target stays empty: once the file is put
// back, the migration goes through.
func TestMigrateStoreRefusesABadBlob(t *testing.T) {
	dsn := pgtest.DSN(t)
	f := newFixture(t)
	signed := f.install(t, hello("1.0.0"))
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.home, "blobs", "sha256", blobs.Digest(signed.Archive))
	good := mustRead(t, p)
	if err := os.WriteFile(p, append(good[:len(good):len(good)], '!'), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := MigrateStore(ctx, f.home, dsn, Config{})
	if !errors.Is(err, host.ErrTampered) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "does not match its sha256") {
		t.Fatalf("corrupted blob: %v", err)
	}
	os.Remove(p)
	_, err = MigrateStore(ctx, f.home, dsn, Config{})
	if !errors.Is(err, host.ErrNotFound) || !strings.Contains(err.Error(), "is missing") {
		t.Fatalf("missing blob: %v", err)
	}
	if err := os.WriteFile(p, good, 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := MigrateStore(ctx, f.home, dsn, Config{})
	if err != nil || !rep.Chain.OK {
		t.Fatalf("after the blob was put back (the target was left empty): %+v %v", rep, err)
	}
	if _, err := MigrateStore(ctx, f.home, "mysql://x/y", Config{}); !errors.Is(err, ErrUsage) {
		t.Fatalf("not a postgres URL: %v", err)
	}
}

// fillHome gives f's store something of every kind: a signed pack, two
// tasks run by the dispatcher (two attempts), an artifact, memory with a
// secret value, a schedule, a sensor event, an agent message, an agent,
// two openwop runs and an API token.
func fillHome(t *testing.T, f *fixture) {
	t.Helper()
	st := f.Store()
	f.install(t, hello("1.0.0"))
	if err := f.SetTaskType(ctx, host.TaskTypeSpec{TaskType: "greet"}, &host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: "greet"}, Pack: "local.hello.c", Node: "example.hello"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"sqlite", "postgres"} {
		task, err := f.Enqueue(ctx, host.TaskIntent{TaskType: "greet", Source: "test", Payload: json.RawMessage(`{"name":"` + name + `"}`)}, host.EnqueueOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.TaskID)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	for _, id := range ids {
		waitStatus(t, f, id, host.TaskCompleted)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	attempts, err := st.ListAttempts(ctx, host.AttemptFilter{TaskID: ids[0]})
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts: %v %v", attempts, err)
	}
	if _, err := st.PutArtifact(ctx, host.ArtifactInput{TaskID: ids[0], AttemptID: attempts[0].AttemptID, Role: host.RoleOutput, Name: "out.txt", ContentType: "text/plain", Data: []byte("hello artifact")}); err != nil {
		t.Fatal(err)
	}
	sc := host.Scope{Tenant: host.DefaultTenant, Namespace: "notes"}
	if err := st.Put(ctx, sc, "plain", json.RawMessage(`{"a":1}`), host.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Put(ctx, sc, "secret", json.RawMessage(`"hunter2"`), host.PutOptions{Secret: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSchedule(ctx, host.ScheduleSpec{Name: "hourly", IntervalSeconds: 3600, Task: host.TaskIntent{TaskType: "greet", Payload: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordSensorEvent(ctx, host.SensorEvent{SensorID: "door", EventID: "e1", ObservedAt: "2026-01-01T00:00:00Z", SourceRef: "test", DedupeKey: "d1", Payload: json.RawMessage(`{}`)}, host.SensorEventOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.PublishMessage(ctx, "", "api", "application/json; profile=bus-envelope", messagetest.Crisis(messagetest.BusID(1), "emotion_recognition")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutAgent(ctx, &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "arc", InternalName: "arc", DisplayName: "Arc"}}); err != nil {
		t.Fatal(err)
	}
	// Runs listed in the order they were created (their seq here, their
	// rowid in SQLite), not by id.
	for _, id := range []string{"run_z", "run_a"} {
		if err := st.CreateRun(ctx, &host.Run{RunID: id, WorkflowID: "wf", Status: host.RunRunning}, []host.RunEvent{{Type: host.RunEventStarted}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := f.CreateToken(ctx, TokenSpec{Tenant: host.DefaultTenant, Scopes: []Scope{auth.ScopeTasksRead}, Name: "ci"}); err != nil {
		t.Fatal(err)
	}
}

// storeView is everything fillHome stored, read through h's store, as
// indented JSON (messages without their list cursor, which is the
// message's own seq on SQLite and its event's on PostgreSQL).
func storeView(t *testing.T, h *Host) string {
	t.Helper()
	st := h.Store()
	v := map[string]any{}
	add := func(name string, val any, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v[name] = val
	}
	tasks, err := st.ListTasks(ctx, host.TaskFilter{})
	add("tasks", tasks, err)
	attempts, err := st.ListAttempts(ctx, host.AttemptFilter{})
	add("attempts", attempts, err)
	events, err := st.Events(ctx, host.EventFilter{Limit: 10000})
	add("events", events, err)
	var contents []string
	for _, e := range events {
		if e.Type != host.EventArtifactRecorded {
			continue
		}
		var d struct {
			ArtifactID string `json:"artifact_id"`
		}
		json.Unmarshal(e.Data, &d)
		a, err := st.Artifact(ctx, d.ArtifactID)
		add("artifact "+d.ArtifactID, a, err)
		b, err := st.ArtifactContent(ctx, d.ArtifactID)
		add("artifact content "+d.ArtifactID, string(b), err)
		contents = append(contents, string(b))
	}
	if len(contents) != 1 {
		t.Fatalf("artifacts read: %q", contents)
	}
	sc := host.Scope{Tenant: host.DefaultTenant, Namespace: "notes"}
	for _, key := range []string{"plain", "secret"} {
		e, err := st.Get(ctx, sc, key)
		add("memory "+key, e, err)
	}
	packs, err := st.ListPacks(ctx)
	add("packs", packs, err)
	for _, p := range packs {
		b, err := st.PackBlob(ctx, p.SHA256)
		add("pack blob "+p.SHA256, len(b), err)
	}
	schedules, err := st.ListSchedules(ctx, "")
	add("schedules", schedules, err)
	sensors, err := st.ListSensorEvents(ctx, host.SensorEventFilter{Limit: 100})
	add("sensor events", sensors, err)
	page, err := st.ListMessages(ctx, host.MessageQuery{})
	if err == nil {
		for i := range page.Messages {
			page.Messages[i].Seq = 0
		}
	}
	add("messages", page, err)
	tokens, err := h.Tokens(ctx)
	add("tokens", tokens, err)
	agents, err := st.ListAgents(ctx)
	add("agents", agents, err)
	// Claimed with no lease (until zero): the claim changes nothing else.
	runs, err := st.ClaimRuns(ctx, "snapshot", host.ClaimEveryRun, time.Time{})
	add("runs", runs, err)
	if len(runs) != 2 || runs[0].RunID != "run_z" {
		t.Fatalf("runs: %+v", runs)
	}
	for _, r := range runs {
		evs, err := st.RunEvents(ctx, r.Tenant, r.RunID)
		add("run events "+r.RunID, evs, err)
	}
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
