package message

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
)

var ctx = context.Background()

// unsigned is doc without its signature property.
func unsigned(t *testing.T, doc []byte) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "signature")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every example of the three seeds is accepted through the publish form
// and through a Content-Type profile, and renders back in its own format
// as it was accepted. (Seed 000's example carries a placeholder
// signature, the 11 bytes of "Hello World": it is sent without it, see
// TestUnverifiableSignatures.)
func TestSeedExamplesPrepare(t *testing.T) {
	for name, f := range map[string]Format{
		"seed000/example1.json": FormatEnvelope, "seed001/query.json": FormatAgentMessage,
		"seed001/response.json": FormatAgentMessage, "seed001/error.json": FormatAgentMessage,
		"bus/crisis.detection.jsonc": FormatBus, "bus/agency.initiative.jsonc": FormatBus,
		"bus/llm.conversation.events.jsonc": FormatBus,
	} {
		doc := messagetest.Seed(name)
		if f == FormatEnvelope {
			doc = unsigned(t, doc)
		}
		form, _ := json.Marshal(map[string]any{"format": f, "message": json.RawMessage(doc)})
		for _, r := range []struct{ ct, body string }{{"", string(form)}, {"application/json; profile=" + string(f), string(doc)}} {
			req, err := ParseRequest(r.ct, []byte(r.body))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			in, err := Prepare(ctx, req, Options{Origin: "api", Now: time.Now()})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			canon, _ := Canonical(doc)
			if in.Hash != Hash(canon) || in.Format != string(f) || in.Topic == "" || in.Sender == "" {
				t.Fatalf("%s: %+v", name, in)
			}
			rec := &host.MessageRecord{Format: in.Format, Document: in.Document, Model: in.Model}
			back, lost, err := Render(rec, f)
			if err != nil || lost != nil {
				t.Fatalf("%s: rendered back: %v %v", name, lost, err)
			}
			if c, _ := Canonical(back); string(c) != string(canon) {
				t.Fatalf("%s: rendered back differs:\n%s\n%s", name, c, canon)
			}
			for _, other := range Formats {
				if _, _, err := Render(rec, other); err != nil {
					var re *RuleError
					if !errors.As(err, &re) {
						t.Fatalf("%s → %s: %v", name, other, err)
					}
				}
			}
		}
	}
}

// The format is named, never guessed.
func TestParseRequestNeedsAFormat(t *testing.T) {
	doc := string(messagetest.Seed("seed000/example1.json"))
	for _, c := range []struct{ ct, body, rule string }{
		{"application/json", doc, RuleRequest},
		{"", `{"message":` + doc + `}`, RuleFormat},
		{"", `{"format":"yaml","message":` + doc + `}`, RuleFormat},
		{"application/json; profile=seed-zero", doc, RuleFormat},
		{"", `{"format":"agent-envelope","message":[1]}`, RuleRequest},
		{"", `{"format":"agent-envelope","message":{},"extra":1}`, RuleRequest},
		{"", `{"format":"agent-envelope","format":"bus-envelope","message":{}}`, RuleJSON},
	} {
		_, err := ParseRequest(c.ct, []byte(c.body))
		var re *RuleError
		if !errors.As(err, &re) || re.Rule != c.rule {
			t.Errorf("%q %.60s: %v, want rule %s", c.ct, c.body, err, c.rule)
		}
	}
}

func identity(pub ed25519.PublicKey, topics ...string) func(context.Context, string) (*host.MessagingIdentity, error) {
	return func(_ context.Context, sender string) (*host.MessagingIdentity, error) {
		if sender != "alice" {
			return nil, nil
		}
		return &host.MessagingIdentity{PublicKey: "ed25519:" + base64.StdEncoding.EncodeToString(pub), Topics: topics}, nil
	}
}

// A sender with a registered key must sign: over the JCS form without the
// signature, in the document (seed 000) or beside it (the publish form).
func TestSignatures(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	doc := messagetest.Envelope(1, "alice", "flag", messagetest.ZeroHash)
	opts := Options{Identity: identity(pub)}
	rule := func(r *Request) string {
		_, err := Prepare(ctx, r, opts)
		var re *RuleError
		if errors.As(err, &re) {
			return re.Rule
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}
	if got := rule(&Request{Format: FormatEnvelope, Document: doc}); got != RuleSigRequired {
		t.Fatalf("unsigned: %s", got)
	}
	signed, err := SignEnvelope(priv, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := rule(&Request{Format: FormatEnvelope, Document: signed}); got != "" {
		t.Fatalf("signed: %s", got)
	}
	in, _ := Prepare(ctx, &Request{Format: FormatEnvelope, Document: signed}, opts)
	if unsignedIn, _ := Prepare(ctx, &Request{Format: FormatEnvelope, Document: doc}, Options{}); in.SignedBy != "alice" || in.Hash != unsignedIn.Hash {
		t.Fatalf("the signature is part of the hash, or not recorded: %+v", in)
	}
	tampered := []byte(strings.Replace(string(signed), `"n":1`, `"n":2`, 1))
	if got := rule(&Request{Format: FormatEnvelope, Document: tampered}); got != RuleSigInvalid {
		t.Fatalf("tampered: %s", got)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	wrong, _ := SignEnvelope(other, doc)
	if got := rule(&Request{Format: FormatEnvelope, Document: wrong}); got != RuleSigInvalid {
		t.Fatalf("another key: %s", got)
	}
	if got := rule(&Request{Format: FormatEnvelope, Document: doc, Signature: "bm90IGEgc2lnbmF0dXJl"}); got != RuleSigMalformed {
		t.Fatalf("short signature: %s", got)
	}
	sig, _ := Sign(priv, doc)
	if got := rule(&Request{Format: FormatEnvelope, Document: doc, Signature: sig}); got != "" {
		t.Fatalf("signature beside the document: %s", got)
	}
	// Another sender has no key: its messages need none.
	if got := rule(&Request{Format: FormatEnvelope, Document: messagetest.Envelope(2, "bob", "flag", messagetest.ZeroHash)}); got != "" {
		t.Fatalf("unregistered sender: %s", got)
	}
}

// A signature is stored only when a registered key verified it: a
// malformed one, or one from a sender with no key (unregistered, a
// registered agent without messaging.public_key, a publisher that looks
// up no keys) is refused (issue 29, finding 6).
func TestUnverifiableSignatures(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	_, stranger, _ := ed25519.GenerateKey(nil)
	keyless := func(_ context.Context, sender string) (*host.MessagingIdentity, error) {
		if sender == "keyless" {
			return &host.MessagingIdentity{Topics: []string{"*"}}, nil
		}
		return identity(pub)(ctx, sender)
	}
	seed := messagetest.Seed("seed000/example1.json")
	wellFormed, _ := SignEnvelope(stranger, messagetest.Envelope(1, "nobody", "flag", messagetest.ZeroHash))
	keylessSigned, _ := SignEnvelope(stranger, messagetest.Envelope(2, "keyless", "flag", messagetest.ZeroHash))
	busDoc := messagetest.Crisis(messagetest.BusID(1), "nobody")
	busSig, _ := Sign(stranger, busDoc)
	for _, c := range []struct {
		name    string
		r       *Request
		o       Options
		rule    string
		mention string
	}{
		{"seed 000's placeholder (11 bytes)", &Request{Format: FormatEnvelope, Document: seed}, Options{Identity: keyless}, RuleSigMalformed, "11 bytes"},
		{"not base64 beside the document", &Request{Format: FormatBus, Document: busDoc, Signature: "%%%"}, Options{Identity: keyless}, RuleSigMalformed, "not base64"},
		{"well-formed, unregistered sender", &Request{Format: FormatEnvelope, Document: wellFormed}, Options{Identity: keyless}, RuleSigUnverifiable, "agent nobody"},
		{"well-formed, agent without a key", &Request{Format: FormatEnvelope, Document: keylessSigned}, Options{Identity: keyless}, RuleSigUnverifiable, "agent keyless"},
		{"beside a bus message, unregistered sender", &Request{Format: FormatBus, Document: busDoc, Signature: busSig}, Options{Identity: keyless}, RuleSigUnverifiable, "unsigned"},
		{"no identity lookup", &Request{Format: FormatEnvelope, Document: wellFormed}, Options{Topics: []string{"*"}}, RuleSigUnverifiable, "checks no agent keys"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := Prepare(ctx, c.r, c.o)
			var re *RuleError
			if !errors.As(err, &re) || re.Rule != c.rule || re.Path != "$.signature" || !strings.Contains(re.Reason, c.mention) {
				t.Fatalf("got %+v, %v; want %s at $.signature naming %q", in, err, c.rule, c.mention)
			}
		})
	}
	// Without the signature, the same messages are accepted, unsigned.
	for _, doc := range [][]byte{unsigned(t, seed), unsigned(t, wellFormed)} {
		in, err := Prepare(ctx, &Request{Format: FormatEnvelope, Document: doc}, Options{Identity: keyless})
		if err != nil || in.SignedBy != "" || strings.Contains(string(in.Model), `"signature"`) {
			t.Fatalf("unsigned: %+v %v", in, err)
		}
	}
}

// Topics outside the publisher's grant or the agent's topics are refused
// with the topic named.
func TestTopicACL(t *testing.T) {
	crisis := &Request{Format: FormatBus, Document: messagetest.Crisis(messagetest.BusID(1), "alice")}
	opsOnly := func(context.Context, string) (*host.MessagingIdentity, error) {
		return &host.MessagingIdentity{Topics: []string{"ops.*"}}, nil
	}
	for _, o := range []Options{{Topics: []string{"ops.*"}}, {Topics: []string{}}, {Identity: opsOnly}} {
		_, err := Prepare(ctx, crisis, o)
		var re *RuleError
		if !errors.As(err, &re) || re.Rule != RuleTopic || !strings.Contains(re.Reason, "crisis.detection") {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	if _, err := Prepare(ctx, crisis, Options{Topics: []string{"crisis.*"}}); err != nil {
		t.Fatal(err)
	}
}

// seed 001's evidence gives the MessageLog its evidence count and
// confidence.
func TestMessageLog(t *testing.T) {
	in, err := Prepare(ctx, &Request{Format: FormatAgentMessage, Document: messagetest.Seed("seed001/response.json")}, Options{Direction: "sent"})
	if err != nil {
		t.Fatal(err)
	}
	if in.Log.Direction != "sent" || in.Log.EvidenceCount != 1 || in.Log.Confidence == nil || *in.Log.Confidence != 85 || in.ReplyTo == "" {
		t.Fatalf("log: %+v reply_to %q", in.Log, in.ReplyTo)
	}
}

// BenchmarkPrepare: one seed-002 crisis.detection message (about 2.5 KB)
// read, decoded, checked, hashed and prepared, as POST /v1/messages does
// before the store.
func BenchmarkPrepare(b *testing.B) {
	doc := messagetest.Crisis(messagetest.BusID(1), "emotion_recognition")
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		r, err := ParseRequest("application/json; profile=bus-envelope", doc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Prepare(ctx, r, Options{Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
}
