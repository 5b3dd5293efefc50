package storetest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// Messages checks host.Messages: one task per matching subscription with
// its priority and payload, dedupe on the message id (same hash: a
// duplicate creating nothing; other hash: a conflict), each sender's
// prev_truth_state chain, dead-lettering on the store's clock, listing
// and paging, tenant isolation, subscriptions, the messages a task's
// attempt published (accepted only when it completes), and that the
// chain covers every accepted message.
func Messages(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"DeliversOncePerSubscriber", messagesDeliversOncePerSubscriber},
		{"SendersChain", messagesSendersChain},
		{"ExpireDeadLetters", messagesExpireDeadLetters},
		{"ListAndPage", messagesListAndPage},
		{"Tenants", messagesTenants},
		{"Subscriptions", messagesSubscriptions},
		{"FinishPublishesStaged", messagesFinishPublishesStaged},
	})
}

// prepare decodes doc in format fm as the API would, for tenant.
func prepare(t testing.TB, fm message.Format, doc []byte, tenant string) *host.MessageInput {
	t.Helper()
	in, err := message.Prepare(ctx, &message.Request{Format: fm, Document: doc}, message.Options{Tenant: tenant, Origin: "api", Now: Epoch})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// subscribe routes message:<node> to node and subscribes it to topics.
func (f *fixture) subscribe(node string, topics ...string) {
	f.t.Helper()
	pack := "local.subs." + node
	tt := host.SubscriberTaskType(node)
	f.route(pack, tt, node)
	if err := f.b.SetPackSubscriptions(ctx, pack, []host.Subscription{{Pack: pack, Node: node, TaskType: tt, Topics: topics}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) publish(in *host.MessageInput) *host.MessageReceipt {
	f.t.Helper()
	r, err := f.b.PublishMessage(ctx, in)
	if err != nil {
		f.t.Fatalf("publish: %v", err)
	}
	return r
}

// messageIDs lists the ids of the messages q selects, paging through
// them all.
func (f *fixture) messageIDs(q host.MessageQuery) []string {
	f.t.Helper()
	var ids []string
	for {
		p, err := f.b.ListMessages(ctx, q)
		if err != nil {
			f.t.Fatalf("list messages: %v", err)
		}
		for _, m := range p.Messages {
			ids = append(ids, m.MessageID)
		}
		if p.Next == 0 {
			return ids
		}
		q.After = p.Next
	}
}

func messagesDeliversOncePerSubscriber(f *fixture) {
	t := f.t
	f.subscribe("responder", "crisis.*")
	f.subscribe("auditor", "*")
	f.subscribe("other", "llm.*")
	in := prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "emotion_recognition"), "")
	r := f.publish(in)
	m := r.Message
	if r.Duplicate || m.MessageID != in.MessageID || m.Hash != in.Hash || m.Tenant != host.DefaultTenant || m.Topic != in.Topic ||
		m.Sender != in.Sender || m.Origin != "api" || !m.AcceptedAt.Equal(f.clock.Now()) || m.EventSeq == 0 || len(m.Deliveries) != 2 {
		t.Fatalf("receipt: %+v", m)
	}
	subs := map[string]bool{}
	for _, d := range m.Deliveries {
		subs[d.Subscriber] = true
		task := f.task(d.TaskID)
		var p struct {
			MessageID string          `json:"message_id"`
			Topic     string          `json:"topic"`
			Sender    string          `json:"sender"`
			Format    string          `json:"format"`
			Document  json.RawMessage `json:"document"`
		}
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if d.Status != host.DeliveryQueued || task.TaskType != host.SubscriberTaskType(d.Subscriber) || task.Priority != host.CrisisQueuePriority ||
			task.Status != host.TaskPending || p.MessageID != in.MessageID || p.Topic != in.Topic || p.Sender != in.Sender ||
			p.Format != string(message.FormatBus) || string(p.Document) != string(in.Document) {
			t.Fatalf("delivery %+v: task %+v payload %s", d, task, task.Payload)
		}
	}
	if !subs["responder"] || !subs["auditor"] {
		t.Fatalf("delivered to %v", subs)
	}
	if got, err := f.b.Message(ctx, "", in.MessageID); err != nil || got.Seq != m.Seq || got.Hash != in.Hash || len(got.Deliveries) != 2 {
		t.Fatalf("stored: %+v %v", got, err)
	}
	accepted := f.events(host.EventFilter{Type: host.EventMessageAccepted})
	if len(accepted) != 1 || accepted[0].Seq != m.EventSeq {
		t.Fatalf("message_accepted events %+v", accepted)
	}
	if d := eventData(t, accepted[0]); d["message_id"] != in.MessageID || d["hash"] != in.Hash {
		t.Fatalf("message_accepted %s", accepted[0].Data)
	}
	if n := len(f.events(host.EventFilter{Type: host.EventMessageDelivered})); n != 2 {
		t.Fatalf("%d message_delivered events", n)
	}
	// Sent again: a duplicate, nothing created.
	again, err := f.b.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "emotion_recognition"), ""))
	if err != nil || !again.Duplicate || again.Message.Seq != m.Seq || again.Message.MessageID != in.MessageID {
		t.Fatalf("resent: %+v %v", again, err)
	}
	if n := len(f.tasks(host.TaskFilter{})); n != 2 {
		t.Fatalf("%d tasks after a resend, want 2", n)
	}
	if n := len(f.events(host.EventFilter{Type: host.EventMessageDuplicate})); n != 1 {
		t.Fatalf("%d message_duplicate events", n)
	}
	// The same id with other content: a conflict naming the accepted hash.
	_, err = f.b.PublishMessage(ctx, prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(1), "someone_else"), ""))
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), in.Hash) {
		t.Fatalf("conflict does not name the accepted hash: %v", err)
	}
	if rep := f.verifyChain(); rep.Messages != 1 {
		t.Fatalf("the chain covers %d messages, want 1", rep.Messages)
	}
	_, err = f.b.Message(ctx, "", "nope")
	wantErr(t, err, host.ErrNotFound)
}

// prev_truth_state must name the hash of the sender's previous accepted
// message; a gap or fork is refused naming both hashes, and nothing is
// stored.
func messagesSendersChain(f *fixture) {
	t := f.t
	first := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash), "")
	f.publish(first)
	second := prepare(t, message.FormatEnvelope, messagetest.Envelope(2, "alice", "propose", first.Hash), "")
	f.publish(second)
	fork := prepare(t, message.FormatEnvelope, messagetest.Envelope(3, "alice", "commit", first.Hash), "")
	_, err := f.b.PublishMessage(ctx, fork)
	wantErr(t, err, host.ErrValidation)
	if !strings.Contains(err.Error(), first.Hash) || !strings.Contains(err.Error(), second.Hash) || !strings.Contains(err.Error(), "prev_truth_state") {
		t.Fatalf("fork refusal does not name both hashes: %v", err)
	}
	// Another sender's chain is its own.
	f.publish(prepare(t, message.FormatEnvelope, messagetest.Envelope(4, "bob", "flag", first.Hash), ""))
	// A chained sender may not leave prev_truth_state out.
	noPrev := *second
	noPrev.MessageID, noPrev.PrevHash, noPrev.Hash = "m-5", "", strings.Repeat("e", 64)
	_, err = f.b.PublishMessage(ctx, &noPrev)
	wantErr(t, err, host.ErrValidation)
	if ids := f.messageIDs(host.MessageQuery{}); len(ids) != 3 {
		t.Fatalf("%d messages stored, want 3: %v", len(ids), ids)
	}
	f.publish(prepare(t, message.FormatEnvelope, messagetest.Envelope(6, "alice", "commit", second.Hash), ""))
	if rep := f.verifyChain(); rep.Messages != 4 {
		t.Fatalf("the chain covers %d messages, want 4", rep.Messages)
	}
}

// A message whose ttl runs out before its subscriber's task starts is
// dead-lettered: its task fails for good and never runs.
func messagesExpireDeadLetters(f *fixture) {
	t := f.t
	f.subscribe("slow", "flag")
	// One whose task is running when its ttl runs out: not dead-lettered.
	started := prepare(t, message.FormatEnvelope, messagetest.Envelope(3, "carol", "flag", messagetest.ZeroHash), "")
	started.ExpiresAt = f.clock.Now().Add(time.Minute)
	startedTask := f.publish(started).Message.Deliveries[0].TaskID
	if task := f.claim(); task.TaskID != startedTask {
		t.Fatalf("claimed %s, want %s", task.TaskID, startedTask)
	}
	in := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash), "")
	in.ExpiresAt = f.clock.Now().Add(time.Minute)
	r := f.publish(in)
	if r.Message.ExpiresAt == nil || !r.Message.ExpiresAt.Equal(in.ExpiresAt) {
		t.Fatalf("expires_at %v", r.Message.ExpiresAt)
	}
	// And one that never expires.
	f.publish(prepare(t, message.FormatEnvelope, messagetest.Envelope(2, "bob", "flag", messagetest.ZeroHash), ""))
	if n, err := f.b.ExpireMessages(ctx, f.clock.Now()); err != nil || n != 0 {
		t.Fatalf("expired early: %d %v", n, err)
	}
	if n, err := f.b.ExpireMessages(ctx, f.clock.Add(2*time.Minute)); err != nil || n != 1 {
		t.Fatalf("expired: %d %v", n, err)
	}
	m, err := f.b.Message(ctx, "", in.MessageID)
	if err != nil || m.Deliveries[0].Status != host.DeliveryDead || m.Deliveries[0].DeadAt == nil || !m.Deliveries[0].TaskStatus.Terminal() {
		t.Fatalf("after expiry: %+v %v", m, err)
	}
	// (host.Messages says "cancelled"; the SQLite store fails the task
	// for good: permanent_failure. Either way it never runs again.)
	if task := f.task(m.Deliveries[0].TaskID); task.Status != host.TaskPermanentFailure {
		t.Fatalf("dead-lettered task %s", task.Status)
	}
	if got, err := f.b.Claim(ctx, "runner-1", f.clock.Now().Add(24*time.Hour)); err == nil && got.TaskID == m.Deliveries[0].TaskID {
		t.Fatalf("a dead-lettered task was claimed: %+v", got)
	}
	dl := f.events(host.EventFilter{Type: host.EventMessageDeadLettered})
	if len(dl) != 1 || dl[0].TaskID != m.Deliveries[0].TaskID || eventData(t, dl[0])["message_id"] != in.MessageID {
		t.Fatalf("message_dead_lettered events %+v", dl)
	}
	if ids := f.messageIDs(host.MessageQuery{Dead: true}); !reflect.DeepEqual(ids, []string{in.MessageID}) {
		t.Fatalf("dead letters: %v", ids)
	}
	if n, err := f.b.ExpireMessages(ctx, f.clock.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("expired again: %d %v", n, err)
	}
}

// Listing filters by topic pattern, sender and reply and pages with a
// cursor, oldest first.
func messagesListAndPage(f *fixture) {
	t := f.t
	prev := messagetest.ZeroHash
	for i := 1; i <= 5; i++ {
		in := prepare(t, message.FormatEnvelope, messagetest.Envelope(i, "alice", []string{"flag", "query"}[i%2], prev), "")
		if i > 3 {
			in.ReplyTo = messagetest.ULID(1) // as a format that carries replies would set it
		}
		f.publish(in)
		prev = in.Hash
	}
	f.publish(prepare(t, message.FormatBus, messagetest.Crisis(messagetest.BusID(9), "emotion_recognition"), ""))
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, messagetest.ULID(i))
	}
	p, err := f.b.ListMessages(ctx, host.MessageQuery{From: "alice", Limit: 2})
	if err != nil || len(p.Messages) != 2 || p.Next == 0 {
		t.Fatalf("first page: %+v %v", p, err)
	}
	if ids := f.messageIDs(host.MessageQuery{From: "alice", Limit: 2}); !reflect.DeepEqual(ids, want) {
		t.Fatalf("paged: %v, want %v", ids, want)
	}
	for pattern, n := range map[string]int{"query": 3, "flag": 2, "crisis.*": 1, "*": 6, "crisis.detection": 1, "cris.*": 0} {
		if ids := f.messageIDs(host.MessageQuery{Topic: pattern}); len(ids) != n {
			t.Fatalf("topic %s: %d messages, want %d", pattern, len(ids), n)
		}
	}
	if ids := f.messageIDs(host.MessageQuery{ReplyTo: messagetest.ULID(1)}); !reflect.DeepEqual(ids, want[3:]) {
		t.Fatalf("replies: %v, want %v", ids, want[3:])
	}
	if m, err := f.b.Message(ctx, "", messagetest.ULID(4)); err != nil || m.ReplyTo != messagetest.ULID(1) {
		t.Fatalf("a reply: %+v %v", m, err)
	}
	if ids := f.messageIDs(host.MessageQuery{From: "nobody"}); len(ids) != 0 {
		t.Fatalf("from nobody: %v", ids)
	}
	_, err = f.b.ListMessages(ctx, host.MessageQuery{Topic: "a..b"})
	wantErr(t, err, host.ErrValidation)
}

func messagesTenants(f *fixture) {
	t := f.t
	f.subscribe("listener", "flag")
	in := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash), "acme")
	r := f.publish(in)
	if r.Message.Tenant != "acme" || len(r.Message.Deliveries) != 1 || f.task(r.Message.Deliveries[0].TaskID).Tenant != "acme" {
		t.Fatalf("acme's message %+v", r.Message)
	}
	for _, tenant := range []string{"", host.DefaultTenant, "bob"} {
		_, err := f.b.Message(ctx, tenant, in.MessageID)
		wantErr(t, err, host.ErrNotFound)
		if ids := f.messageIDs(host.MessageQuery{Tenant: tenant}); len(ids) != 0 {
			t.Fatalf("tenant %q lists %v", tenant, ids)
		}
	}
	if got, err := f.b.Message(ctx, "acme", in.MessageID); err != nil || got.MessageID != in.MessageID {
		t.Fatalf("acme reads its message: %+v %v", got, err)
	}
	// The same id (and a chain of the same sender) in another tenant is
	// another message, not a duplicate.
	other := f.publish(prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash), ""))
	if other.Duplicate || other.Message.Tenant != host.DefaultTenant {
		t.Fatalf("the default tenant's copy: %+v", other)
	}
	if ids := f.messageIDs(host.MessageQuery{Tenant: "acme"}); !reflect.DeepEqual(ids, []string{in.MessageID}) {
		t.Fatalf("acme lists %v", ids)
	}
}

func messagesSubscriptions(f *fixture) {
	t := f.t
	if subs, err := f.b.Subscriptions(ctx); err != nil || len(subs) != 0 {
		t.Fatalf("no subscriptions yet: %+v %v", subs, err)
	}
	sub := func(pack, node string, topics ...string) host.Subscription {
		return host.Subscription{Pack: pack, Node: node, TaskType: host.SubscriberTaskType(node), Topics: topics}
	}
	if err := f.b.SetPackSubscriptions(ctx, "local.b", []host.Subscription{sub("local.b", "z", "flag"), sub("local.b", "a", "crisis.*", "query")}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.SetPackSubscriptions(ctx, "local.a", []host.Subscription{sub("local.a", "m", "*")}); err != nil {
		t.Fatal(err)
	}
	list := func() []string {
		subs, err := f.b.Subscriptions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, s := range subs {
			out = append(out, s.Pack+"/"+s.Node+":"+s.TaskType+strings.Join(s.Topics, "|"))
		}
		return out
	}
	if got, want := list(), []string{"local.a/m:message:m*", "local.b/a:message:acrisis.*|query", "local.b/z:message:zflag"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("subscriptions %v, want %v", got, want)
	}
	// Replaced whole; nil removes a pack's.
	if err := f.b.SetPackSubscriptions(ctx, "local.b", []host.Subscription{sub("local.b", "y", "flag")}); err != nil {
		t.Fatal(err)
	}
	if err := f.b.SetPackSubscriptions(ctx, "local.a", nil); err != nil {
		t.Fatal(err)
	}
	if got := list(); !reflect.DeepEqual(got, []string{"local.b/y:message:yflag"}) {
		t.Fatalf("after replacing: %v", got)
	}
	for _, bad := range [][]host.Subscription{
		{sub("local.other", "n", "flag")}, // another pack's node
		{sub("local.b", "n")},             // no topic
		{sub("local.b", "n", "a..b")},     // a malformed pattern
	} {
		if err := f.b.SetPackSubscriptions(ctx, "local.b", bad); !strings.Contains(err.Error(), "subscriptions[0]") {
			t.Fatalf("%+v: %v", bad, err)
		} else {
			wantErr(t, err, host.ErrValidation)
		}
	}
	if got := list(); !reflect.DeepEqual(got, []string{"local.b/y:message:yflag"}) {
		t.Fatalf("refused subscriptions changed them: %v", got)
	}
}

// Messages an attempt published are accepted by the Finish that completes
// its task, in its write; one out of its sender's chain is refused with
// an event; a failed attempt publishes nothing.
func messagesFinishPublishesStaged(f *fixture) {
	t := f.t
	f.routeDemo()
	f.subscribe("listener", "flag")
	for _, ok := range []bool{false, true} {
		f.enqueue(intent("demo.fix", host.Priority(-9)), host.EnqueueOptions{MaxAttempts: 1, Tenant: "acme"})
		task := f.claim()
		good := prepare(t, message.FormatEnvelope, messagetest.Envelope(1, "pack", "flag", messagetest.ZeroHash), "")
		forked := prepare(t, message.FormatEnvelope, messagetest.Envelope(2, "pack", "flag", strings.Repeat("f", 64)), "")
		good.Origin, forked.Origin = "task:"+task.TaskID, "task:"+task.TaskID
		out := okOutcome()
		if !ok {
			out.MachineStatus = host.MachineFailed
		}
		f.finish(task, host.FinishInput{Outcome: out, Messages: []host.MessageInput{*good, *forked}})
		ids := f.messageIDs(host.MessageQuery{Tenant: "acme"})
		if !ok && len(ids) != 0 {
			t.Fatalf("a failed attempt's messages published: %v", ids)
		}
		if ok {
			m, err := f.b.Message(ctx, "acme", good.MessageID)
			if len(ids) != 1 || err != nil || m.Origin != "task:"+task.TaskID || len(m.Deliveries) != 1 {
				t.Fatalf("published %v: %+v %v", ids, m, err)
			}
			if f.task(m.Deliveries[0].TaskID).Tenant != "acme" {
				t.Fatal("the delivery's task is not the publishing task's tenant's")
			}
			types := f.eventTypes(task.TaskID)
			if !contains(types, host.EventMessageAccepted) || !contains(types, host.EventMessageRefused) {
				t.Fatalf("events of the publishing task: %v", types)
			}
		}
	}
}

func contains(have []string, want string) bool {
	for _, h := range have {
		if h == want {
			return true
		}
	}
	return false
}
