package sqlite

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// prepare decodes doc in format f as the API would.
func prepare(t testing.TB, f message.Format, doc []byte) *host.MessageInput {
	t.Helper()
	in, err := message.Prepare(ctx, &message.Request{Format: f, Document: doc}, message.Options{Origin: "api", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// subscribe routes message:<node> to node and subscribes it to topics.
func subscribe(t testing.TB, s *Store, node string, topics ...string) {
	t.Helper()
	tt := host.SubscriberTaskType(node)
	if err := s.SetPackTaskTypes(ctx, "local.subs."+node, []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: "local.subs." + node, Node: node}}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPackSubscriptions(ctx, "local.subs."+node, []host.Subscription{{Pack: "local.subs." + node, Node: node, TaskType: tt, Topics: topics}}); err != nil {
		t.Fatal(err)
	}
}

func countRows(t testing.TB, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A message creates one task per matching subscription, crisis topics
// first; resending it creates nothing; reusing its id for other content
// is a conflict.
func TestPublishDeliversOncePerSubscriber(t *testing.T) {
	f := newFixture(t, Options{})
	subscribe(t, f.Store, "responder", "crisis.*")
	subscribe(t, f.Store, "auditor", "*")
	subscribe(t, f.Store, "other", "llm.*")
	in := prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "emotion_recognition"))
	r, err := f.PublishMessage(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if r.Duplicate || len(r.Message.Deliveries) != 2 {
		t.Fatalf("receipt: %+v", r)
	}
	for _, d := range r.Message.Deliveries {
		task, err := f.Task(ctx, d.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			MessageID string          `json:"message_id"`
			Document  json.RawMessage `json:"document"`
		}
		json.Unmarshal(task.Payload, &p)
		if task.TaskType != host.SubscriberTaskType(d.Subscriber) || task.Priority != host.CrisisQueuePriority || p.MessageID != in.MessageID || string(p.Document) != string(in.Document) {
			t.Fatalf("task %+v payload %s", task, task.Payload)
		}
	}
	again, err := f.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "emotion_recognition")))
	if err != nil || !again.Duplicate || again.Message.Seq != r.Message.Seq {
		t.Fatalf("resent: %+v %v", again, err)
	}
	if n := countRows(t, f.Store, "tasks"); n != 2 {
		t.Fatalf("%d tasks after a resend, want 2", n)
	}
	_, err = f.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "someone_else")))
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), in.Hash) {
		t.Fatalf("conflict does not name the accepted hash: %v", err)
	}
	if got := eventTypes(t, f.Store, ""); !containsAll(got, host.EventMessageAccepted, host.EventMessageDelivered, host.EventMessageDuplicate) {
		t.Fatalf("events: %v", got)
	}
	// A subscription added later (the cached subscriptions are dropped),
	// and one seen by another process's store.
	subscribe(t, f.Store, "late", "crisis.detection")
	r2, err := f.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(2), "emotion_recognition")))
	if err != nil || len(r2.Message.Deliveries) != 3 {
		t.Fatalf("after a new subscription: %+v %v", r2, err)
	}
	other := f.another(t)
	subscribe(t, other, "later", "crisis.*")
	r3, err := f.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(3), "emotion_recognition")))
	if err != nil || len(r3.Message.Deliveries) != 4 {
		t.Fatalf("after another process's subscription: %+v %v", r3, err)
	}
	rep, err := f.VerifyChain(ctx)
	if err != nil || !rep.OK {
		t.Fatalf("chain: %+v %v", rep, err)
	}
}

func containsAll(have []string, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// prev_truth_state must name the hash of the sender's previous accepted
// message; a gap or fork is refused naming both hashes, and nothing is
// stored.
func TestPublishChecksTheSendersChain(t *testing.T) {
	f := newFixture(t, Options{})
	first := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash))
	if _, err := f.PublishMessage(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := prepare(t, message.FormatEnvelope, messagetest.Envelope(2, "alice", "propose", first.Hash))
	if _, err := f.PublishMessage(ctx, second); err != nil {
		t.Fatal(err)
	}
	fork := prepare(t, message.FormatEnvelope, messagetest.Envelope(3, "alice", "commit", first.Hash))
	_, err := f.PublishMessage(ctx, fork)
	wantErr(t, err, host.ErrValidation)
	if !strings.Contains(err.Error(), first.Hash) || !strings.Contains(err.Error(), second.Hash) || !strings.Contains(err.Error(), "prev_truth_state") {
		t.Fatalf("fork refusal does not name both hashes: %v", err)
	}
	// Another sender's chain is its own.
	if _, err := f.PublishMessage(ctx, prepare(t, message.FormatEnvelope, messagetest.Envelope(4, "bob", "flag", first.Hash))); err != nil {
		t.Fatal(err)
	}
	// A chained sender may not leave prev_truth_state out (seed 001 carries none).
	noPrev := *second
	noPrev.MessageID, noPrev.PrevHash, noPrev.Hash = "m-5", "", strings.Repeat("e", 64)
	_, err = f.PublishMessage(ctx, &noPrev)
	wantErr(t, err, host.ErrValidation)
	if n := countRows(t, f.Store, "messages"); n != 3 {
		t.Fatalf("%d messages stored, want 3", n)
	}
	third := prepare(t, message.FormatEnvelope, messagetest.Envelope(6, "alice", "commit", second.Hash))
	if _, err := f.PublishMessage(ctx, third); err != nil {
		t.Fatal(err)
	}
}

// A message whose ttl runs out before its subscriber's task starts is
// dead-lettered: the task fails for good and never runs.
func TestExpireMessagesDeadLetters(t *testing.T) {
	f := newFixture(t, Options{})
	subscribe(t, f.Store, "slow", "flag")
	in := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash))
	in.ExpiresAt = f.clock.Now().Add(time.Minute)
	r, err := f.PublishMessage(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.ExpireMessages(ctx, f.clock.Now()); err != nil || n != 0 {
		t.Fatalf("expired early: %d %v", n, err)
	}
	if n, err := f.ExpireMessages(ctx, f.clock.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expired: %d %v", n, err)
	}
	m, err := f.Message(ctx, "", in.MessageID)
	if err != nil || m.Deliveries[0].Status != host.DeliveryDead || m.Deliveries[0].TaskStatus != host.TaskPermanentFailure {
		t.Fatalf("after expiry: %+v %v", m, err)
	}
	if task, _ := f.Claim(ctx, "runner-1", f.clock.Now()); task != nil {
		t.Fatalf("a dead-lettered task was claimed: %+v", task)
	}
	dead, err := f.ListMessages(ctx, host.MessageQuery{Dead: true})
	if err != nil || len(dead.Messages) != 1 || dead.Messages[0].MessageID != r.Message.MessageID {
		t.Fatalf("dead letters: %+v %v", dead, err)
	}
}

// Listing filters by topic pattern and sender and pages with a cursor.
func TestListMessages(t *testing.T) {
	f := newFixture(t, Options{})
	prev := messagetest.ZeroHash
	for i := 1; i <= 5; i++ {
		in := prepare(t, message.FormatEnvelope, messagetest.Envelope(i, "alice", []string{"flag", "query"}[i%2], prev))
		if _, err := f.PublishMessage(ctx, in); err != nil {
			t.Fatal(err)
		}
		prev = in.Hash
	}
	if _, err := f.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(9), "emotion_recognition"))); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for after := int64(0); ; {
		p, err := f.ListMessages(ctx, host.MessageQuery{From: "alice", Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Messages {
			ids = append(ids, m.MessageID)
		}
		if p.Next == 0 {
			break
		}
		after = p.Next
	}
	if len(ids) != 5 || ids[0] != messagetest.ULID(1) || ids[4] != messagetest.ULID(5) {
		t.Fatalf("paged: %v", ids)
	}
	for pattern, want := range map[string]int{"query": 3, "flag": 2, "crisis.*": 1, "*": 6, "crisis.detection": 1, "cris.*": 0} {
		p, err := f.ListMessages(ctx, host.MessageQuery{Topic: pattern})
		if err != nil || len(p.Messages) != want {
			t.Fatalf("topic %s: %d messages, %v; want %d", pattern, len(p.Messages), err, want)
		}
	}
	_, err := f.ListMessages(ctx, host.MessageQuery{Topic: "a..b"})
	wantErr(t, err, host.ErrValidation)
}

// evidence verify covers every accepted message: a changed document, a
// removed message or one inserted behind the chain's back breaks it.
func TestVerifyChainCoversMessages(t *testing.T) {
	for _, c := range []struct {
		name, sql, problem string
	}{
		{"changed", `UPDATE messages SET document = replace(document, '"n":1', '"n":2')`, host.BreakMessageHash},
		{"model changed", `UPDATE messages SET model = replace(model, 'alice', 'mallory')`, host.BreakMessageHash},
		{"removed", `DELETE FROM messages`, host.BreakMessageMissing},
		{"inserted", `INSERT INTO messages SELECT NULL, tenant, 'forged', format, document, model, hash, sender, recipient, topic, kind, reply_to,
			priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq + 1000 FROM messages`, host.BreakMessageUnchain},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			if _, err := f.PublishMessage(ctx, prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash))); err != nil {
				t.Fatal(err)
			}
			if _, err := f.db.Exec(c.sql); err != nil {
				t.Fatal(err)
			}
			rep, err := f.VerifyChain(ctx)
			if err != nil || rep.OK || rep.Broken.Problem != c.problem {
				t.Fatalf("report %+v %v; want %s", rep.Broken, err, c.problem)
			}
		})
	}
}

// Messages an attempt published are accepted by the Finish that completes
// its task, in its transaction, with the attempt named; one out of chain
// is refused with an event; a failed attempt publishes nothing.
func TestFinishPublishesStagedMessages(t *testing.T) {
	f := newFixture(t, Options{})
	routeDemo(t, f)
	subscribe(t, f.Store, "listener", "flag")
	for _, ok := range []bool{false, true} {
		mustEnqueue(t, f.Store, intent("demo.fix", nil), host.EnqueueOptions{MaxAttempts: 1})
		task := mustClaim(t, f.Store, f.clock.Now())
		a := attemptFor(t, f.Store, task)
		good := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "pack", "flag", messagetest.ZeroHash))
		forked := prepare(t, message.FormatEnvelope, messagetest.Envelope(2, "pack", "flag", strings.Repeat("f", 64)))
		good.Origin, forked.Origin = "task:"+task.TaskID, "task:"+task.TaskID
		in := host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome(), Messages: []host.MessageInput{*good, *forked}}
		if !ok {
			in.Outcome.MachineStatus = host.MachineFailed
		}
		if _, err := f.Finish(ctx, task.TaskID, in); err != nil {
			t.Fatal(err)
		}
		n := countRows(t, f.Store, "messages")
		if !ok && n != 0 {
			t.Fatalf("a failed attempt's messages published: %d", n)
		}
		if ok {
			m, err := f.Message(ctx, "", good.MessageID)
			if n != 1 || err != nil || m.Origin != "task:"+task.TaskID || len(m.Deliveries) != 1 {
				t.Fatalf("published %d: %+v %v", n, m, err)
			}
			if got := eventTypes(t, f.Store, task.TaskID); !containsAll(got, host.EventMessageAccepted, host.EventMessageRefused) {
				t.Fatalf("events of the publishing task: %v", got)
			}
		}
	}
}

// BenchmarkPublishParallel: 16 goroutines per CPU publish distinct seed-002
// crisis.detection messages (decoded, hashed and prepared outside the
// timer) to a store with one subscribed node, so every message is a
// durable write of the message, its task, its delivery and three events.
// Beside it, BenchmarkEnqueueParallel is the plain enqueue.
func BenchmarkPublishParallel(b *testing.B) {
	s := benchStore(b)
	subscribe(b, s, "responder", "crisis.*")
	ins := make([]*host.MessageInput, b.N)
	for i := range ins {
		ins[i] = prepare(b, message.FormatBus, messagetest.Crisis(messagetest.BusID(i), "emotion_recognition"))
	}
	var next atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := s.PublishMessage(ctx, ins[next.Add(1)-1])
			if err != nil || len(r.Message.Deliveries) != 1 {
				b.Fatal(r, err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
