package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// messagesHome is a new home where node watcher (of pack local.watch)
// subscribes to crisis.*.
func messagesHome(t *testing.T) (homeCLI, string) {
	t.Helper()
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	ctx := context.Background()
	hh, err := packrun.Open(ctx, h.home, packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer hh.Close(ctx)
	b, tt := hh.Store(), host.SubscriberTaskType("watcher")
	if err := b.SetPackTaskTypes(ctx, "local.watch", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: "local.watch", Node: "watcher"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetPackSubscriptions(ctx, "local.watch", []host.Subscription{{Pack: "local.watch", Node: "watcher", TaskType: tt, Topics: []string{"crisis.*"}}}); err != nil {
		t.Fatal(err)
	}
	return h, dir
}

// refusedWith runs args and checks the exit code and that stderr's first
// line holds each of want, with nothing on stdout.
func (h homeCLI) refusedWith(code int, args []string, want ...string) {
	h.t.Helper()
	c, out, errs := h.run(args...)
	line := strings.SplitN(errs, "\n", 2)[0]
	if c != code || out != "" || strings.Contains(line, ": : ") {
		h.t.Fatalf("%v: exit %d, stdout %q, stderr %q; want exit %d", args, c, out, errs, code)
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			h.t.Errorf("%v: %q does not name %q", args, line, w)
		}
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const crisisID = "550e8400-e29b-41d4-a716-446655440001"

// send, list, show and subscriptions over a home with one subscriber; a
// refused message exits 5 naming the path and the rule, and stores
// nothing.
func TestMessagesCommands(t *testing.T) {
	h, dir := messagesHome(t)
	crisis := writeFile(t, dir, "crisis.json", messagetest.Crisis(crisisID, "sensor.a"))
	out := h.ok("messages", "send", crisis, "--format", "bus-envelope")
	if !strings.HasPrefix(out, "accepted "+crisisID+" (bus-envelope, topic crisis.detection, from sensor.a, seq ") || !strings.Contains(out, "watcher → task ") {
		t.Fatalf("send: %s", out)
	}
	if out := h.ok("messages", "send", crisis, "--format", "bus-envelope"); !strings.HasPrefix(out, "duplicate "+crisisID) {
		t.Fatalf("resend: %s", out)
	}
	form := writeFile(t, dir, "form.json", fmt.Appendf(nil, `{"format":"agent-envelope","message":%s}`, messagetest.Envelope(1, "lister", "query", messagetest.ZeroHash)))
	var rec host.MessageReceipt
	if err := json.Unmarshal([]byte(h.ok("messages", "send", form, "--json")), &rec); err != nil || rec.Duplicate || rec.Message.Sender != "lister" {
		t.Fatalf("publish form: %+v %v", rec, err)
	}

	// Refusals.
	h.refusedWith(exitRefused, []string{"messages", "send", crisis}, "INVALID_REQUEST", "profile=")
	bad := writeFile(t, dir, "bad.json", []byte(strings.Replace(string(messagetest.Crisis(crisisID, "sensor.a")), `"source":"sensor.a"`, `"source":7`, 1)))
	h.refusedWith(exitRefused, []string{"messages", "send", bad, "--format", "bus-envelope"}, "$.metadata.source")
	h.refusedWith(exitUsage, []string{"messages", "send", crisis, "--format", "xml"}, "--format", "bus-envelope")
	h.refusedWith(exitUsage, []string{"messages", "send", crisis, "--signature", "AAAA"}, "--signature needs --format")
	h.refusedWith(exitNotFound, []string{"messages", "send", filepath.Join(dir, "missing.json"), "--format", "bus-envelope"}, "missing.json")
	fork := writeFile(t, dir, "fork.json", messagetest.Envelope(2, "lister", "query", messagetest.ZeroHash))
	h.refusedWith(exitRefused, []string{"messages", "send", fork, "--format", "agent-envelope"}, "prev_truth_state", messagetest.ZeroHash, rec.Message.Hash)

	// list: both messages, oldest first; filters; the cursor.
	var page host.MessagePage
	if err := json.Unmarshal([]byte(h.ok("messages", "list", "--json")), &page); err != nil || len(page.Messages) != 2 || page.Messages[0].MessageID != crisisID {
		t.Fatalf("list: %+v %v", page, err)
	}
	if out := h.ok("messages", "list", "--topic", "crisis.*"); !strings.Contains(out, crisisID) || strings.Contains(out, "lister") {
		t.Fatalf("list --topic:\n%s", out)
	}
	out = h.ok("messages", "list", "--limit", "1")
	if !strings.Contains(out, crisisID) || !strings.Contains(out, fmt.Sprintf("more: --cursor %d", page.Messages[0].Seq)) {
		t.Fatalf("list --limit 1:\n%s", out)
	}
	if out := h.ok("messages", "list", "--after", fmt.Sprint(page.Messages[0].Seq)); strings.Contains(out, crisisID) || !strings.Contains(out, "lister") {
		t.Fatalf("list --after:\n%s", out)
	}
	h.refusedWith(exitUsage, []string{"messages", "list", "--limit", "0"}, "--limit")

	// show: its own format, another (lost fields on stderr), --json.
	if out := h.ok("messages", "show", crisisID); !strings.Contains(out, `"message_id": "`+crisisID+`"`) {
		t.Fatalf("show:\n%s", out)
	}
	env := messagetest.ULID(1)
	code, out, errs := h.run("messages", "show", env, "--format", "agent-message")
	if code != 0 || !strings.Contains(out, `"type": "query"`) || !strings.HasPrefix(errs, "lost in agent-message: ") || !strings.Contains(errs, "prev_truth_state") {
		t.Fatalf("show --format: exit %d\n%s\n%s", code, out, errs)
	}
	var shown shownMessage
	if err := json.Unmarshal([]byte(h.ok("messages", "show", env, "--format", "agent-message", "--json")), &shown); err != nil ||
		shown.Format != "agent-message" || len(shown.Lost) == 0 || shown.Record.MessageID != env || !json.Valid(shown.Document) {
		t.Fatalf("show --json: %+v %v", shown, err)
	}
	h.refusedWith(exitNotFound, []string{"messages", "show", "no-such"}, "no-such")
	if code, out, errs := h.run("messages", "show", crisisID, "--format", "agent-message"); code != 0 || !strings.Contains(out, `"type": "event"`) ||
		!strings.Contains(errs, "metadata.message_type (crisis.detection written as type event)") {
		t.Fatalf("a bus message as seed 001: exit %d\n%s\n%s", code, out, errs)
	}

	// subscriptions.
	if out := h.ok("messages", "subscriptions"); !strings.Contains(out, "local.watch") || !strings.Contains(out, "crisis.*") || !strings.Contains(out, "message:watcher") {
		t.Fatalf("subscriptions:\n%s", out)
	}
}

// keygen makes a key whose public half an agent FILE registers; its
// messages must then be signed: unsigned and wrongly signed are refused,
// messages sign makes one that is accepted.
func TestMessagesSigned(t *testing.T) {
	h, dir := messagesHome(t)
	key := filepath.Join(dir, "arc")
	pub := strings.TrimSpace(h.ok("messages", "keygen", "--out", key))
	if !strings.HasPrefix(pub, "ed25519:") {
		t.Fatalf("keygen printed %q", pub)
	}
	if fi, err := os.Stat(key + ".key"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	h.refusedWith(exitUsage, []string{"messages", "keygen", "--out", key}, "arc.key exists")
	agent := func(id string) []byte {
		return fmt.Appendf(nil, `{"agent":{"agent_id":%q,"internal_name":%[1]q,"display_name":%[1]q},"messaging":{"public_key":%q}}`, id, pub)
	}
	h.ok("agents", "add", writeFile(t, dir, "arc.json", agent("arc")))

	doc := writeFile(t, dir, "env.json", messagetest.Envelope(5, "arc", "flag", messagetest.ZeroHash))
	h.refusedWith(exitRefused, []string{"messages", "send", doc, "--format", "agent-envelope"}, "SIGNATURE_REQUIRED", "$.signature")

	other := filepath.Join(dir, "other")
	h.ok("messages", "keygen", "--out", other)
	forged := writeFile(t, dir, "forged.json", []byte(h.ok("messages", "sign", doc, "--key", other+".key")))
	h.refusedWith(exitRefused, []string{"messages", "send", forged, "--format", "agent-envelope"}, "SIGNATURE_INVALID")

	signed := writeFile(t, dir, "signed.json", []byte(h.ok("messages", "sign", doc, "--key", key+".key")))
	if out := h.ok("messages", "send", signed, "--format", "agent-envelope"); !strings.HasPrefix(out, "accepted "+messagetest.ULID(5)) {
		t.Fatalf("signed send: %s", out)
	}
	var rec host.MessageRecord
	if err := json.Unmarshal([]byte(h.ok("messages", "show", messagetest.ULID(5), "--json")), &struct {
		Record *host.MessageRecord `json:"record"`
	}{&rec}); err != nil || rec.SignedBy != "arc" {
		t.Fatalf("signed record %+v %v", rec, err)
	}

	// A format without a signature field: sign prints the publish form,
	// which send takes as it is (agent bee shares arc's key).
	h.ok("agents", "add", writeFile(t, dir, "bee.json", agent("bee")))
	signedForm := h.ok("messages", "sign", writeFile(t, dir, "c.json", messagetest.Crisis(crisisID, "bee")), "--key", key+".key", "--format", "bus-envelope")
	var sm packrun.SignedMessage
	if err := json.Unmarshal([]byte(signedForm), &sm); err != nil || sm.Format != "bus-envelope" || sm.Signature == "" {
		t.Fatalf("sign --format bus-envelope: %+v %v", sm, err)
	}
	if out := h.ok("messages", "send", writeFile(t, dir, "c.signed.json", []byte(signedForm))); !strings.HasPrefix(out, "accepted "+crisisID+" (bus-envelope, topic crisis.detection, from bee") {
		t.Fatalf("signed publish form: %s", out)
	}
	h.refusedWith(exitUsage, []string{"messages", "sign", doc, "--key", filepath.Join(dir, "arc.pub")}, "PRIVATE KEY")
	h.ok("keys", "generate", "--out", filepath.Join(dir, "ecdsa"))
	h.refusedWith(exitUsage, []string{"messages", "sign", doc, "--key", filepath.Join(dir, "ecdsa.key")}, "not an Ed25519 key")
	h.refusedWith(exitRefused, []string{"messages", "sign", crisisFile(t, dir), "--key", key + ".key"}, "agent-envelope")
}

// crisisFile is a bus-envelope message: not a seed 000 envelope.
func crisisFile(t *testing.T, dir string) string {
	return writeFile(t, dir, "crisis-as-envelope.json", messagetest.Crisis(crisisID, "arc"))
}

// tail prints the messages after its cursor as they are accepted, and
// stops after --max.
func TestMessagesTail(t *testing.T) {
	h, dir := messagesHome(t)
	for i := range 2 {
		h.ok("messages", "send", writeFile(t, dir, fmt.Sprintf("e%d.json", i), messagetest.Envelope(10+i, fmt.Sprint("t", i), "flag", messagetest.ZeroHash)), "--format", "agent-envelope")
	}
	out := h.ok("messages", "tail", "--after", "0", "--max", "2", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], messagetest.ULID(10)) || !strings.Contains(lines[1], messagetest.ULID(11)) {
		t.Fatalf("tail from the start:\n%s", out)
	}
	var last host.MessageRecord
	if err := json.Unmarshal([]byte(lines[1]), &last); err != nil {
		t.Fatal(err)
	}

	// From the last cursor: tail waits for the next message.
	done := make(chan string)
	go func() {
		_, out, errs := h.run("messages", "tail", "--after", fmt.Sprint(last.Seq), "--max", "1", "--interval", "20ms", "--from", "t9")
		done <- out + errs
	}()
	h.ok("messages", "send", writeFile(t, dir, "other.json", messagetest.Envelope(12, "t8", "flag", messagetest.ZeroHash)), "--format", "agent-envelope")
	h.ok("messages", "send", writeFile(t, dir, "late.json", messagetest.Envelope(13, "t9", "flag", messagetest.ZeroHash)), "--format", "agent-envelope")
	out = <-done
	if !strings.Contains(out, messagetest.ULID(13)) || strings.Contains(out, messagetest.ULID(12)) || !strings.HasPrefix(out, "SEQ  ACCEPTED") {
		t.Fatalf("tail:\n%s", out)
	}
	h.refusedWith(exitUsage, []string{"messages", "tail", "--interval", "0s"}, "--interval")
}
