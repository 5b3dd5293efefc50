package dispatch

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

// opsAlert is a seed 002 bus envelope of topic ops.alert in the publish
// form, as testdata/modules/publish.wat publishes it.
const opsAlert = `{"format":"bus-envelope","message":{"metadata":{"message_id":"11111111-2222-3333-4444-555555555555",` +
	`"timestamp":"2026-01-02T15:04:05Z","source":"probe","message_type":"ops.alert","version":"1.0"},"payload":{"n":1}}}`

// finishSpy is the real store, with what the dispatcher hands its Finish
// and PublishMessage kept for the tests to read (the store of messages is
// the lead's; here only what reaches it matters).
type finishSpy struct {
	host.Backend
	mu        sync.Mutex
	finished  []host.FinishInput
	published []host.MessageInput
}

func (s *finishSpy) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	s.mu.Lock()
	s.finished = append(s.finished, in)
	s.mu.Unlock()
	return s.Backend.Finish(ctx, taskID, in)
}

func (s *finishSpy) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	s.mu.Lock()
	s.published = append(s.published, *in)
	s.mu.Unlock()
	return &host.MessageReceipt{Message: &host.MessageRecord{MessageID: in.MessageID}}, nil
}

// last returns the last FinishInput handed over.
func (s *finishSpy) last(t *testing.T) host.FinishInput {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.finished) == 0 {
		t.Fatal("no task was settled")
	}
	return s.finished[len(s.finished)-1]
}

// publishEnv is a dispatcher serving testdata/modules/publish.wasm as
// local.publish (ABI 1.2) with the given grants, task types test.publish
// and test.outbox routed to its two nodes, over a finishSpy.
func publishEnv(t *testing.T, grants string) (env, *finishSpy, []byte) {
	t.Helper()
	arch, wasm := wasmPack(t, "publish.wasm", `"name":"local.publish","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":2},
		"modules":[{"path":"publish.wasm","sha256":%q}]},"nodes":[{"typeId":"test.publish","kind":"node"},{"typeId":"test.outbox","kind":"node"}]`+grants)
	e := newEnvWith(t, arch)
	spy := &finishSpy{Backend: e.backend}
	e.d.cfg.Backend = spy
	routes := []host.TaskTypeRoute{
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: "test.publish"}, Pack: "local.publish", Node: "test.publish"},
		{TaskTypeSpec: host.TaskTypeSpec{TaskType: "test.outbox"}, Pack: "local.publish", Node: "test.outbox"},
	}
	if err := e.backend.SetPackTaskTypes(context.Background(), "local.publish", routes); err != nil {
		t.Fatal(err)
	}
	return e, spy, wasm
}

const opsGrant = `,"grants":{"services":["messages"],"topics":["ops.*"]}`

// A message published with message_publish is staged and handed to the
// store with the task's settlement, as the task's.
func TestMessagePublishStagedUntilTheTaskCompletes(t *testing.T) {
	e, spy, _ := publishEnv(t, opsGrant)
	task := runTaskOf(t, e, "test.publish")
	if task.Status != host.TaskCompleted || !strings.Contains(task.Outcome.RawOutput, `"published":true`) {
		t.Fatalf("task %s: %+v %s", task.Status, task.Outcome, task.LastError)
	}
	msgs := spy.last(t).Messages
	if len(msgs) != 1 {
		t.Fatalf("FinishInput.Messages = %+v", msgs)
	}
	m := msgs[0]
	if m.MessageID != "11111111-2222-3333-4444-555555555555" || m.Topic != "ops.alert" || m.Origin != "task:"+task.TaskID ||
		m.Format != "bus-envelope" || m.Log.Direction != "sent" || len(m.Hash) != 64 || m.Tenant != task.Tenant {
		t.Fatalf("message %+v", m)
	}
	if len(spy.published) != 0 {
		t.Fatal("a queued task's message was published before the settlement")
	}
}

// Without the messages grant, or with a grant whose topics do not cover
// the message's, message_publish is denied and nothing is handed over.
func TestMessagePublishRefusedOutsideTheGrant(t *testing.T) {
	for name, grants := range map[string]string{
		"no grant":            "",
		"topic not granted":   `,"grants":{"services":["messages"],"topics":["crisis.*"]}`,
		"service, no topics":  `,"grants":{"services":["messages"]}`,
		"topics of one topic": `,"grants":{"services":["messages"],"topics":["ops.alert.x"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			e, spy, _ := publishEnv(t, grants)
			task := runTaskOf(t, e, "test.publish")
			if task.Status != host.TaskCompleted || !strings.Contains(task.Outcome.RawOutput, `"published":false`) {
				t.Fatalf("task %s: %+v", task.Status, task.Outcome)
			}
			if msgs := spy.last(t).Messages; len(msgs) != 0 {
				t.Fatalf("messages handed over: %+v", msgs)
			}
		})
	}
}

// serveWith calls Serve on services bound as b.
func serveWith(b binding, fn, req string) (abi.Status, map[string]any) {
	s := newServices(b)
	st, resp := s.Serve(context.Background(), fn, []byte(req))
	var body map[string]any
	json.Unmarshal(resp, &body)
	return st, body
}

// message_publish's answers: access denied naming the topic or the
// reason, a validation error naming the rule, the staged message.
func TestMessagePublishAnswers(t *testing.T) {
	granted := packs.Grants{Services: []packs.Service{packs.ServiceMessages}, Topics: []string{"ops.*"}}
	forbid := &bundle{profile: &host.SubagentProfile{ResultPolicy: host.ResultPolicy{AllowExternalMessages: false}}}
	for _, tc := range []struct {
		name   string
		b      binding
		req    string
		status abi.Status
		want   string // in the answer's error
	}{
		{"no grant", binding{tenant: "t1"}, opsAlert, abi.StatusAccessDenied, "not granted the messages service"},
		{"topic outside", binding{grants: packs.Grants{Services: granted.Services, Topics: []string{"crisis.*"}}}, opsAlert, abi.StatusAccessDenied, "topic ops.alert"},
		{"profile forbids", binding{grants: granted, bundle: forbid}, opsAlert, abi.StatusAccessDenied, "allow_external_messages is false"},
		{"not the publish form", binding{grants: granted}, `{"topic":"ops.alert"}`, abi.StatusValidation, "INVALID_REQUEST"},
		{"unknown format", binding{grants: granted}, `{"format":"smoke-signal","message":{}}`, abi.StatusValidation, "FORMAT_REQUIRED"},
		{"invalid message", binding{grants: granted}, strings.Replace(opsAlert, `"source":"probe",`, ``, 1), abi.StatusValidation, "$.metadata.source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := serveWith(tc.b, abi.HostMessagePublish, tc.req)
			if st != tc.status || !strings.Contains(fmt.Sprint(body["error"]), tc.want) {
				t.Fatalf("status %d %v, want %d with %q", st, body, tc.status, tc.want)
			}
		})
	}
	s := newServices(binding{grants: granted, tenant: "t1", attemptID: "a1"})
	for i := 1; i <= host.MaxPublishedMessages; i++ {
		st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(opsAlert))
		var body map[string]any
		json.Unmarshal(resp, &body)
		if st != abi.StatusOK || body["status"] != "staged" || body["staged"] != float64(i) ||
			body["message_id"] != "11111111-2222-3333-4444-555555555555" || len(fmt.Sprint(body["hash"])) != 64 {
			t.Fatalf("publish %d: %d %v", i, st, body)
		}
	}
	if st, _ := s.Serve(context.Background(), abi.HostMessagePublish, []byte(opsAlert)); st != abi.StatusCapabilityBreach {
		t.Fatalf("past the limit: %d", st)
	}
	if m := s.messages[0]; m.Origin != "attempt:a1" || m.Tenant != "t1" {
		t.Fatalf("outside the queue: origin %q tenant %q", m.Origin, m.Tenant)
	}
}

// A module's message is checked against its sender's registered agent as
// one from outside is (issue 29, finding 6): in a keyed agent's name it
// needs that agent's signature, and a signature no registered key can
// check is refused rather than staged unchecked.
func TestMessagePublishChecksAgentSignatures(t *testing.T) {
	e, _, _ := publishEnv(t, opsGrant)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := &host.AgentRecord{Agent: host.AgentIdentity{AgentID: "probe", InternalName: "probe", DisplayName: "probe"},
		Messaging: &host.MessagingIdentity{PublicKey: "ed25519:" + base64.StdEncoding.EncodeToString(pub)}}
	if _, err := e.backend.PutAgent(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	granted := binding{backend: e.backend, grants: packs.Grants{Services: []packs.Service{packs.ServiceMessages}, Topics: []string{"ops.*"}}, tenant: "t1", attemptID: "a1"}
	var form struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal([]byte(opsAlert), &form); err != nil {
		t.Fatal(err)
	}
	withSig := func(doc []byte, sig string) string {
		return fmt.Sprintf(`{"format":"bus-envelope","message":%s,"signature":%q}`, doc, sig)
	}
	sig, _ := message.Sign(priv, form.Message)
	_, stranger, _ := ed25519.GenerateKey(nil)
	other := []byte(strings.Replace(string(form.Message), `"source":"probe"`, `"source":"someone"`, 1))
	strangerSig, _ := message.Sign(stranger, other)
	for _, tc := range []struct{ name, req, want string }{
		{"keyed agent, unsigned", opsAlert, message.RuleSigRequired},
		{"keyed agent, another key", withSig(form.Message, strangerSig), message.RuleSigInvalid},
		{"unregistered sender, signed", withSig(other, strangerSig), message.RuleSigUnverifiable},
		{"malformed", withSig(other, "SGVsbG8gV29ybGQ="), message.RuleSigMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServices(granted)
			st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(tc.req))
			if st != abi.StatusValidation || !strings.Contains(string(resp), tc.want) || len(s.messages) != 0 {
				t.Fatalf("status %d %s, staged %d; want a validation error naming %s", st, resp, len(s.messages), tc.want)
			}
		})
	}
	s := newServices(granted)
	if st, resp := s.Serve(context.Background(), abi.HostMessagePublish, []byte(withSig(form.Message, sig))); st != abi.StatusOK || len(s.messages) != 1 || s.messages[0].SignedBy != "probe" {
		t.Fatalf("signed by the agent: %d %s %+v", st, resp, s.messages)
	}
}

// An outcome's external_messages in the publish form are published with
// the task's settlement (origin outbox:<task>); the other entries stay in
// the outbox as before.
func TestOutboxPublishFormIsPublished(t *testing.T) {
	e, spy, _ := publishEnv(t, opsGrant)
	task := runTaskOf(t, e, "test.outbox")
	if task.Status != host.TaskCompleted {
		t.Fatalf("task %s: %s", task.Status, task.LastError)
	}
	in := spy.last(t)
	if len(in.Messages) != 1 || in.Messages[0].MessageID != "22222222-2222-3333-4444-555555555555" || in.Messages[0].Origin != "outbox:"+task.TaskID {
		t.Fatalf("messages %+v", in.Messages)
	}
	if len(in.Outcome.ExternalMessage) != 1 || string(in.Outcome.ExternalMessage[0]) != `{"channel":"ops","text":"done"}` {
		t.Fatalf("outbox %s", in.Outcome.ExternalMessage)
	}
	box, err := e.backend.Outbox(context.Background(), task.TaskID)
	if err != nil || len(box) != 1 || !strings.Contains(string(box[0].Message), `"channel":"ops"`) {
		t.Fatalf("outbox %+v %v", box, err)
	}
}

// A publish-form entry the grant refuses fails the task, naming the entry
// and the topic: nothing of the attempt is applied.
func TestOutboxPublishFormRefusedFailsTheTask(t *testing.T) {
	e, spy, _ := publishEnv(t, `,"grants":{"services":["messages"],"topics":["crisis.*"]}`)
	task := runTaskOf(t, e, "test.outbox")
	if task.Status != host.TaskPermanentFailure || !strings.Contains(task.LastError, "taskOutcome.external_messages[0]") ||
		!strings.Contains(task.LastError, "topic ops.alert") {
		t.Fatalf("task %s: %s", task.Status, task.LastError)
	}
	if in := spy.last(t); len(in.Messages) != 0 || len(in.Outcome.ExternalMessage) != 0 {
		t.Fatalf("applied: %+v", in)
	}
}

// Outside the queue a completed invocation's messages are published at
// once, as the attempt's.
func TestInvokePublishesMessages(t *testing.T) {
	e, spy, _ := publishEnv(t, opsGrant)
	att, res, err := e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.publish", Node: "test.publish", Input: json.RawMessage(`{}`), Tenant: "t1"})
	if err != nil || res.Outcome != abi.Completed {
		t.Fatalf("invoke: %v %+v", err, res)
	}
	if len(spy.published) != 1 || spy.published[0].Origin != "attempt:"+att.AttemptID || spy.published[0].Tenant != "t1" {
		t.Fatalf("published %+v", spy.published)
	}
}

// A message_publish call is a host call of the attempt's trace: replaying
// the attempt serves it from the trace (same output) and reaches no
// service, so nothing is staged or published again.
func TestReplayDoesNotPublishAgain(t *testing.T) {
	ctx := context.Background()
	e, spy, wasm := publishEnv(t, opsGrant)
	task := runTaskOf(t, e, "test.publish")
	in := spy.last(t)
	if len(in.Messages) != 1 || in.Record == nil {
		t.Fatalf("recorded %+v", in)
	}
	att, err := e.backend.Attempt(ctx, in.Record.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(att.Trace), abi.HostMessagePublish) {
		t.Fatalf("message_publish is not in the trace: %s", att.Trace)
	}
	tr, err := replay.FromAttempt(att)
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.d.cfg.Runtime.Load(ctx, wasm, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	v, err := replay.Run(ctx, m, tr, nil)
	if err != nil || !v.Identical || !strings.Contains(string(v.Got.Output), `"published":true`) {
		t.Fatalf("replay: %+v %v", v, err)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.finished) != 1 || len(spy.published) != 0 {
		t.Fatalf("the replay reached the store: %d settlements, %d published", len(spy.finished), len(spy.published))
	}
	if rest, _ := e.backend.ListTasks(ctx, host.TaskFilter{}); len(rest) != 1 || rest[0].TaskID != task.TaskID {
		t.Fatalf("tasks after the replay: %d", len(rest))
	}
}

// FuzzMessagePublish: any request gets one of message_publish's statuses,
// with an {"error"} on a refusal, and only an accepted one is staged.
func FuzzMessagePublish(f *testing.F) {
	f.Add([]byte(opsAlert))
	f.Add([]byte(`{"format":"agent-envelope","message":{}}`))
	f.Add([]byte(`{"format":"bus-envelope","message":[]}`))
	f.Add([]byte(`{`))
	granted := packs.Grants{Services: []packs.Service{packs.ServiceMessages}, Topics: []string{"ops.*"}}
	f.Fuzz(func(t *testing.T, req []byte) {
		s := newServices(binding{grants: granted, tenant: "t1", attemptID: "a1"})
		st, resp := s.Serve(context.Background(), abi.HostMessagePublish, req)
		var body map[string]any
		if err := json.Unmarshal(resp, &body); err != nil {
			t.Fatalf("status %d, response %q", st, resp)
		}
		switch st {
		case abi.StatusOK:
			if len(s.messages) != 1 || body["status"] != "staged" {
				t.Fatalf("accepted but %d staged: %v", len(s.messages), body)
			}
		case abi.StatusAccessDenied, abi.StatusValidation:
			if len(s.messages) != 0 || body["error"] == nil {
				t.Fatalf("refused %d but %d staged: %v", st, len(s.messages), body)
			}
		default:
			t.Fatalf("status %d: %v", st, body)
		}
	})
}

// message_publish is ABI 1.2: a pack declaring 1.1 may not import it.
func TestMessagePublishNeedsABI12(t *testing.T) {
	arch, _ := wasmPack(t, "publish.wasm", `"name":"local.publish","version":"1.0.0","runtime":{"language":"wasm","abi":{"version":1,"minor":1},
		"modules":[{"path":"publish.wasm","sha256":%q}]},"nodes":[{"typeId":"test.publish","kind":"node"}]`+opsGrant)
	e := newEnvWith(t, arch)
	_, _, err := e.d.Invoke(context.Background(), InvokeRequest{Pack: "local.publish", Node: "test.publish", Input: json.RawMessage(`{}`)})
	if err == nil || !strings.Contains(err.Error(), "message_publish was added in ABI 1.2; the pack declares 1.1") {
		t.Fatalf("a 1.1 pack importing message_publish: %v", err)
	}
}
