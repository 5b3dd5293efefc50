package api

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

const (
	profileBus      = "application/json; profile=bus-envelope"
	profileEnvelope = "application/json; profile=agent-envelope"
)

// subscribe makes node of a pack of its own subscribe to topics, its
// deliveries routed to it.
func subscribe(t *testing.T, b host.Backend, node string, topics ...string) {
	t.Helper()
	ctx, pack, tt := t.Context(), "local.subs."+node, host.SubscriberTaskType(node)
	if err := b.SetPackTaskTypes(ctx, pack, []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: pack, Node: node}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPackSubscriptions(ctx, pack, []host.Subscription{{Pack: pack, Node: node, TaskType: tt, Topics: topics}}); err != nil {
		t.Fatal(err)
	}
}

// registerAgent registers agent id with a messaging identity.
func registerAgent(t *testing.T, b host.Backend, id string, m *host.MessagingIdentity) {
	t.Helper()
	if _, err := b.PutAgent(t.Context(), &host.AgentRecord{Agent: host.AgentIdentity{AgentID: id, InternalName: id, DisplayName: id}, Messaging: m}); err != nil {
		t.Fatal(err)
	}
}

// raw sends a request as token (""; none) and returns the answer whatever
// its Content-Type.
func (e *env) raw(method, path, contentType, token, body string) resp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// wantRefused checks a refused message's answer: status, the error
// envelope's code, its JSON path and rule, a one-line message holding
// each of mentions.
func wantRefused(t *testing.T, r resp, status int, code, path, rule string, mentions ...string) {
	t.Helper()
	wantStatus(t, r, status)
	var body struct {
		Error errorDetail `json:"error"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil {
		t.Fatal(err)
	}
	d := body.Error
	if d.Code != code || d.Path != path || d.Rule != rule || strings.Contains(d.Message, "\n") || strings.HasPrefix(d.Message, ":") {
		t.Fatalf("error %+v, want code %q path %q rule %q", d, code, path, rule)
	}
	for _, m := range mentions {
		if !strings.Contains(d.Message, m) {
			t.Errorf("error %q does not mention %q", d.Message, m)
		}
	}
}

func TestPostMessage(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	subscribe(t, b, "crisis.watch", "crisis.*")

	crisis := string(messagetest.Crisis(messagetest.BusID(1), "sensor.a"))
	r := e.do(http.MethodPost, "/v1/messages", profileBus, crisis)
	wantStatus(t, r, http.StatusCreated)
	got := decode[messageReceipt](t, r)
	if got.Duplicate || len(got.Tasks) != 1 || got.Message.Topic != "crisis.detection" || got.Message.Format != "bus-envelope" || got.Message.Origin != "api" {
		t.Fatalf("accepted %s", r.body)
	}
	task := decode[*host.TaskRecord](t, e.get("/v1/tasks/"+got.Tasks[0]))
	if task.TaskType != host.SubscriberTaskType("crisis.watch") {
		t.Fatalf("task %+v", task)
	}

	// Sent again: 200, a duplicate, nothing created.
	r = e.do(http.MethodPost, "/v1/messages", profileBus, crisis)
	wantStatus(t, r, http.StatusOK)
	if d := decode[messageReceipt](t, r); !d.Duplicate || len(d.Tasks) != 0 || d.Message.MessageID != got.Message.MessageID {
		t.Fatalf("duplicate %s", r.body)
	}
	if n := len(e.listTasks("?task_type=" + host.SubscriberTaskType("crisis.watch"))); n != 1 {
		t.Fatalf("%d subscriber tasks after a resend", n)
	}

	// The publish form: seed 000's example (without its placeholder
	// signature, which no key can check), to no subscriber.
	seed := strings.Replace(string(messagetest.Seed("seed000/example1.json")), `"signature": "SGVsbG8gV29ybGQ=",`, "", 1)
	form := fmt.Sprintf(`{"format":"agent-envelope","message":%s}`, seed)
	r = e.post("/v1/messages", form)
	wantStatus(t, r, http.StatusCreated)
	if d := decode[messageReceipt](t, r); d.Message.Sender != "contradiction" || len(d.Tasks) != 0 {
		t.Fatalf("envelope %s", r.body)
	}

	// The same id with other content: 409.
	other := string(messagetest.Crisis(messagetest.BusID(1), "sensor.b"))
	wantError(t, e.do(http.MethodPost, "/v1/messages", profileBus, other), http.StatusConflict, CodeConflict, "")
	if n := len(e.listTasks("?task_type=" + host.SubscriberTaskType("crisis.watch"))); n != 1 {
		t.Fatalf("%d subscriber tasks after refusals", n)
	}
}

func TestPostMessageRefused(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	crisis := string(messagetest.Crisis(messagetest.BusID(2), "sensor.a"))

	// A seed rule: the path and the rule named.
	bad := strings.Replace(crisis, `"source":"sensor.a"`, `"source":7`, 1)
	r := e.do(http.MethodPost, "/v1/messages", profileBus, bad)
	wantStatus(t, r, http.StatusUnprocessableEntity)
	var d struct {
		Error errorDetail `json:"error"`
	}
	if json.Unmarshal(r.body, &d) != nil || d.Error.Code != CodeMessageRefused || d.Error.Path != "$.metadata.source" || d.Error.Rule == "" || d.Error.Field != "metadata.source" {
		t.Fatalf("invalid variant: %s", r.body)
	}

	// No format: refused, saying how to name one.
	wantRefused(t, e.post("/v1/messages", crisis), http.StatusUnprocessableEntity, CodeMessageRefused, "$.metadata", message.RuleRequest, "profile=")
	wantRefused(t, e.post("/v1/messages", `{"message":`+crisis+`}`), http.StatusUnprocessableEntity, CodeMessageRefused, "$.format", message.RuleFormat, "profile=")
	wantRefused(t, e.do(http.MethodPost, "/v1/messages", "application/json; profile=json", crisis), http.StatusUnprocessableEntity, CodeMessageRefused, "", message.RuleFormat, "json")

	// Too large for a message (the body limit is larger).
	huge := `{"format":"bus-envelope","message":{"pad":"` + strings.Repeat("x", host.MaxMessageBytes+8<<10) + `"}}`
	wantRefused(t, e.post("/v1/messages", huge), http.StatusRequestEntityTooLarge, CodeTooLarge, "", "MAX_BYTES")

	// A fork in a sender's chain: both hashes named.
	first := messagetest.Envelope(10, "chainer", "flag", messagetest.ZeroHash)
	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(first))
	wantStatus(t, r, http.StatusCreated)
	head := decode[messageReceipt](t, r).Message.Hash
	fork := messagetest.Envelope(11, "chainer", "flag", messagetest.ZeroHash)
	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(fork))
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.prev_truth_state", "", messagetest.ZeroHash, head)
	next := messagetest.Envelope(11, "chainer", "flag", head)
	wantStatus(t, e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(next)), http.StatusCreated)

	page := decode[host.MessagePage](t, e.get("/v1/messages"))
	if len(page.Messages) != 2 {
		t.Fatalf("%d messages stored after refusals, want 2", len(page.Messages))
	}
}

func TestPostMessageSigned(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	registerAgent(t, b, "signer", &host.MessagingIdentity{PublicKey: "ed25519:" + base64.StdEncoding.EncodeToString(pub)})
	doc := messagetest.Envelope(20, "signer", "flag", messagetest.ZeroHash)

	r := e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(doc))
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigRequired, "signer")

	_, otherKey, _ := ed25519.GenerateKey(nil)
	forged, err := message.SignEnvelope(otherKey, doc)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(forged))
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigInvalid)

	signed, err := message.SignEnvelope(priv, doc)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(signed))
	wantStatus(t, r, http.StatusCreated)
	if rec := decode[messageReceipt](t, r).Message; rec.SignedBy != "signer" {
		t.Fatalf("signed message %+v", rec)
	}

	// The signature beside the document, in the publish form.
	doc2 := messagetest.Envelope(21, "signer", "flag", decode[messageReceipt](t, r).Message.Hash)
	sig, err := message.Sign(priv, doc2)
	if err != nil {
		t.Fatal(err)
	}
	r = e.post("/v1/messages", fmt.Sprintf(`{"format":"agent-envelope","message":%s,"signature":%q}`, doc2, sig))
	wantStatus(t, r, http.StatusCreated)

	// An agent limited to ops.* may not publish crisis.detection: 403.
	registerAgent(t, b, "opsbot", &host.MessagingIdentity{Topics: []string{"ops.*"}})
	r = e.do(http.MethodPost, "/v1/messages", profileBus, string(messagetest.Crisis(messagetest.BusID(3), "opsbot")))
	wantRefused(t, r, http.StatusForbidden, CodeTopicNotAllowed, "$.metadata.message_type", message.RuleTopic, "crisis.detection")
}

// uuid4 is a UUID v4 made from n: an id every format can carry (seed
// 001 wants UUIDs, seed 002 their shape).
func uuid4(n int) string { return fmt.Sprintf("550e8400-e29b-41d4-a716-%012d", n) }

func TestListAndGetMessages(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	for i := range 5 {
		wantStatus(t, e.do(http.MethodPost, "/v1/messages", profileBus, string(messagetest.Crisis(uuid4(100+i), "sensor.list"))), http.StatusCreated)
	}
	wantStatus(t, e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(messagetest.Envelope(30, "lister", "query", messagetest.ZeroHash))), http.StatusCreated)

	// Pages of two, by cursor, crisis.* only.
	var seen []string
	after := int64(0)
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("the cursor does not end")
		}
		page := decode[messagePage](t, e.get(fmt.Sprintf("/v1/messages?topic=crisis.*&limit=2&cursor=%d", after)))
		// after, the deprecated alias of cursor, answers the same page.
		if alias := decode[messagePage](t, e.get(fmt.Sprintf("/v1/messages?topic=crisis.*&limit=2&after=%d", after))); fmt.Sprint(alias.Messages) != fmt.Sprint(page.Messages) {
			t.Fatalf("after=%d: %+v, cursor: %+v", after, alias.Messages, page.Messages)
		}
		for _, m := range page.Messages {
			seen = append(seen, m.MessageID)
		}
		if page.Next == 0 {
			if page.NextCursor != "" {
				t.Fatalf("last page with next_cursor %q", page.NextCursor)
			}
			break
		}
		if page.NextCursor != fmt.Sprint(page.Next) {
			t.Fatalf("next_cursor %q, next %d", page.NextCursor, page.Next)
		}
		after = page.Next
	}
	if len(seen) != 5 || seen[0] != uuid4(100) || seen[4] != uuid4(104) {
		t.Fatalf("listed %v", seen)
	}
	if l := decode[host.MessagePage](t, e.get("/v1/messages?from=lister")).Messages; len(l) != 1 || l[0].Kind != "query" {
		t.Fatalf("from=lister: %+v", l)
	}
	wantError(t, e.get("/v1/messages?limit=0"), http.StatusBadRequest, CodeInvalid, "limit")
	wantError(t, e.get("/v1/messages?dead=yes"), http.StatusBadRequest, CodeInvalid, "dead")
	wantError(t, e.get("/v1/messages?topc=x"), http.StatusBadRequest, CodeInvalid, "topc")

	// One message in its own format and in another.
	id := uuid4(100)
	r := e.raw(http.MethodGet, "/v1/messages/"+id, "", "", "")
	wantStatus(t, r, http.StatusOK)
	if ct := r.header.Get("Content-Type"); ct != profileBus || r.header.Get(HeaderLostFields) != "" || !strings.Contains(string(r.body), id) {
		t.Fatalf("own format: %s %q lost %q", r.body, ct, r.header.Get(HeaderLostFields))
	}
	// Seed 000's envelope as seed 001's AgentMessage: what it cannot
	// carry is listed, not dropped silently.
	env := messagetest.ULID(30)
	r = e.raw(http.MethodGet, "/v1/messages/"+env+"?format=agent-message", "", "", "")
	wantStatus(t, r, http.StatusOK)
	lost := r.header.Get(HeaderLostFields)
	if ct := r.header.Get("Content-Type"); ct != "application/json; profile=agent-message" || !strings.Contains(lost, "prev_truth_state") || strings.Contains(lost, "prev_hash") || !strings.Contains(lost, "id (ULID") {
		t.Fatalf("agent-message: %q lost %q", ct, lost)
	}
	var am map[string]any
	if err := json.Unmarshal(r.body, &am); err != nil || am["type"] != "query" || am["from"] == nil {
		t.Fatalf("agent-message document %s: %v", r.body, err)
	}
	// A bus message as seed 001: its id, kind and topic written as the
	// format can, and listed in the header.
	r = e.raw(http.MethodGet, "/v1/messages/"+id+"?format=agent-message", "", "", "")
	if lost := r.header.Get("Packrun-Lost-Fields"); r.status != http.StatusOK || !strings.Contains(lost, "metadata.message_type (crisis.detection written as type event)") {
		t.Fatalf("crisis as agent-message: %d lost %q %s", r.status, lost, r.body)
	}
	rec := decode[host.MessageRecord](t, e.get("/v1/messages/"+id+"?view=record"))
	if rec.MessageID != id || rec.Deliveries == nil && rec.Topic != "crisis.detection" {
		t.Fatalf("record %+v", rec)
	}
	wantError(t, e.get("/v1/messages/"+id+"?format=xml"), http.StatusBadRequest, CodeInvalid, "format")
	wantError(t, e.get("/v1/messages/"+id+"?view=all"), http.StatusBadRequest, CodeInvalid, "view")

	// Another tenant's message answers as a missing one.
	req, err := message.ParseRequest(profileBus, messagetest.Crisis(messagetest.BusID(900), "sensor.other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := message.Accept(t.Context(), b, req, message.Options{Tenant: "other", Origin: "api"}); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.get("/v1/messages/"+messagetest.BusID(900)), http.StatusNotFound, CodeNotFound, "")
	wantError(t, e.get("/v1/messages/no-such"), http.StatusNotFound, CodeNotFound, "")
	if l := decode[host.MessagePage](t, e.get("/v1/messages?from=sensor.other")).Messages; len(l) != 0 {
		t.Fatalf("another tenant's message listed: %+v", l)
	}
}

func TestMessageScopes(t *testing.T) {
	tokens := map[string]*auth.Principal{
		"reader": {TokenID: "r", Tenant: "t1", Scopes: []auth.Scope{auth.ScopeMessagesRead}},
		"writer": {TokenID: "w", Tenant: "t1", Scopes: []auth.Scope{auth.ScopeMessagesWrite}},
		"admin":  {TokenID: "a", Tenant: "t2", Scopes: []auth.Scope{auth.ScopeAdmin}},
	}
	e := newEnv(t, newBackend(t), func(c *Config) {
		c.Auth = Auth{Authenticate: func(_ context.Context, tok string) (*auth.Principal, error) {
			if p := tokens[tok]; p != nil {
				return p, nil
			}
			return nil, fmt.Errorf("unknown token")
		}}
	})
	crisis := string(messagetest.Crisis(messagetest.BusID(7), "sensor.s"))
	wantStatus(t, e.raw(http.MethodPost, "/v1/messages", profileBus, "reader", crisis), http.StatusForbidden)
	r := e.raw(http.MethodPost, "/v1/messages", profileBus, "writer", crisis)
	wantStatus(t, r, http.StatusCreated)
	if rec := decode[messageReceipt](t, r).Message; rec.Tenant != "t1" {
		t.Fatalf("tenant %q, want the token's", rec.Tenant)
	}
	wantStatus(t, e.raw(http.MethodGet, "/v1/messages", "", "writer", ""), http.StatusForbidden)
	wantStatus(t, e.raw(http.MethodGet, "/v1/messages/"+messagetest.BusID(7), "", "reader", ""), http.StatusOK)
	// admin has every scope, but t2 does not see t1's message.
	wantStatus(t, e.raw(http.MethodGet, "/v1/messages/"+messagetest.BusID(7), "", "admin", ""), http.StatusNotFound)
	// The call's audit record is the message's own event, naming the token.
	evs, err := e.backend.Events(t.Context(), host.EventFilter{Type: host.EventMessageAccepted})
	if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"by":"`+tokens["writer"].TokenID+`"`) {
		t.Fatalf("message_accepted events %v: %+v", err, evs)
	}
}

// Senders that look like a registered agent without being it are refused
// in every format, whatever the agent requires, and nothing is stored
// (issue 29, finding 7).
func TestPostMessageLookAlikeSenders(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	pub, _, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	registerAgent(t, b, "signer", &host.MessagingIdentity{PublicKey: "ed25519:" + base64.StdEncoding.EncodeToString(pub)})
	var query map[string]any
	if err := json.Unmarshal(messagetest.Seed("seed001/query.json"), &query); err != nil {
		t.Fatal(err)
	}
	for i, sender := range []string{"Signer", "signer ", "ѕigner", "signer\u200b", "signer.", "SIGNER", "signer\u00a0", "signer\ufe0f"} {
		t.Run(fmt.Sprintf("%q", sender), func(t *testing.T) {
			query["id"] = uuid4(700 + i)
			query["from"] = map[string]any{"agentId": sender, "instanceId": "i-1"}
			am, _ := json.Marshal(query)
			r := e.do(http.MethodPost, "/v1/messages", "application/json; profile=agent-message", string(am))
			wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.from.agentId", message.RuleSenderID)

			r = e.do(http.MethodPost, "/v1/messages", profileBus, string(messagetest.Crisis(uuid4(800+i), sender)))
			wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.metadata.source", message.RuleSenderID)

			env := strings.Replace(string(messagetest.Envelope(900+i, "signer", "flag", messagetest.ZeroHash)), `"agent://signer"`, strconv.Quote("agent://"+sender), 1)
			r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, env)
			wantStatus(t, r, http.StatusUnprocessableEntity)
		})
	}
	// The real sender still needs its signature.
	query["id"], query["from"] = uuid4(799), map[string]any{"agentId": "signer", "instanceId": "i-1"}
	am, _ := json.Marshal(query)
	wantRefused(t, e.do(http.MethodPost, "/v1/messages", "application/json; profile=agent-message", string(am)),
		http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigRequired, "signer")
	if page := decode[host.MessagePage](t, e.get("/v1/messages")); len(page.Messages) != 0 {
		t.Fatalf("%d messages stored after refusals, the first from %q", len(page.Messages), page.Messages[0].Sender)
	}
}

// A signature that cannot be checked is refused, never stored as if it
// had been (issue 29, finding 6): seed 000's example signature (11
// bytes) from an unregistered agent://nobody, and a well-formed one from
// the same sender, which has no key to check it against. Sent unsigned,
// the message is accepted and its record says no key signed it.
func TestPostMessageUnverifiableSignature(t *testing.T) {
	b := newBackend(t)
	e := newEnv(t, b, nil)
	doc := strings.Replace(string(messagetest.Envelope(40, "nobody", "flag", messagetest.ZeroHash)), `"from"`, `"signature":"SGVsbG8gV29ybGQ=","from"`, 1)
	r := e.do(http.MethodPost, "/v1/messages", profileEnvelope, doc)
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigMalformed, "64-byte", "11 bytes")

	_, key, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	unsigned := messagetest.Envelope(40, "nobody", "flag", messagetest.ZeroHash)
	signed, err := message.SignEnvelope(key, unsigned)
	if err != nil {
		t.Fatal(err)
	}
	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(signed))
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigUnverifiable, "nobody", "messaging.public_key")
	sig, _ := message.Sign(key, messagetest.Crisis(uuid4(41), "nobody"))
	r = e.post("/v1/messages", fmt.Sprintf(`{"format":"bus-envelope","message":%s,"signature":%q}`, messagetest.Crisis(uuid4(41), "nobody"), sig))
	wantRefused(t, r, http.StatusUnprocessableEntity, CodeMessageRefused, "$.signature", message.RuleSigUnverifiable, "nobody")
	if page := decode[host.MessagePage](t, e.get("/v1/messages")); len(page.Messages) != 0 {
		t.Fatalf("%d messages stored after refusals", len(page.Messages))
	}

	r = e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(unsigned))
	wantStatus(t, r, http.StatusCreated)
	rec := decode[host.MessageRecord](t, e.get("/v1/messages/"+messagetest.ULID(40)+"?view=record"))
	if rec.SignedBy != "" || strings.Contains(string(rec.Document), "signature") || strings.Contains(string(rec.Model), "signature") {
		t.Fatalf("unsigned message recorded as signed: %+v", rec)
	}
}

// A seed 000 message (a ULID id) renders as bus-envelope with the id
// ?format=agent-message writes (the UUID of its 128 bits), and
// Packrun-Lost-Fields names its fields as seed 000 does (issue 29,
// finding 10).
func TestGetMessageAsBusEnvelope(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	wantStatus(t, e.do(http.MethodPost, "/v1/messages", profileEnvelope, string(messagetest.Envelope(50, "ulider", "query", messagetest.ZeroHash))), http.StatusCreated)
	id := messagetest.ULID(50)
	r := e.raw(http.MethodGet, "/v1/messages/"+id+"?format=bus-envelope", "", "", "")
	wantStatus(t, r, http.StatusOK)
	var doc struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	am := e.raw(http.MethodGet, "/v1/messages/"+id+"?format=agent-message", "", "", "")
	var amDoc struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(am.body, &amDoc); err != nil {
		t.Fatal(err)
	}
	if ct := r.header.Get("Content-Type"); ct != profileBus || amDoc.ID != "msg-"+doc.Metadata["message_id"] ||
		doc.Metadata["source"] != "ulider" || doc.Metadata["message_type"] != "agent.query" {
		t.Fatalf("bus-envelope %q: %s (agent-message id %s)", ct, r.body, amDoc.ID)
	}
	for _, res := range []resp{r, am} {
		lost := res.header.Get(HeaderLostFields)
		if !strings.Contains(lost, "prev_truth_state") || strings.Contains(lost, "prev_hash") || !strings.Contains(lost, "id ("+id+" written as ") && !strings.Contains(lost, "id (ULID "+id) {
			t.Errorf("%s lost %q", res.header.Get("Content-Type"), lost)
		}
	}
}
