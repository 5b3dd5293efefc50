package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/packrun/packrun/internal/message/messagetest"
)

// lookAlikes are senders that look like "signer" without being it (issue
// 29, finding 7), with what the refusal must name.
var lookAlikes = []struct{ name, id, mention string }{
	{"upper case", "Signer", "upper-case 'S'"},
	{"trailing space", "signer ", "space U+0020"},
	{"Cyrillic s", "ѕigner", "Cyrillic"},
	{"zero-width space", "signer\u200b", "invisible character U+200B"},
	{"trailing dot", "signer.", "ends with '.'"},
	{"leading hyphen", "-signer", "begins with '-'"},
	{"no-break space", "sig\u00a0ner", "space U+00A0"},
	{"combining mark", "signe\u0301r", "combining mark U+0301"},
	{"Hangul filler", "signer\u3164", "invisible character U+3164"},
	{"variation selector", "signer\ufe0f", "invisible character U+FE0F"},
	{"fullwidth", "ｓigner", "Latin"},
	{"Greek omicron", "sοigner", "Greek"},
	{"slash", "signer/x", "'/'"},
	{"empty", "", "required"},
	{"too long", strings.Repeat("s", MaxSenderID+1), "longer than 128"},
	{"not UTF-8", "sign\xffer", "UTF-8"},
}

func TestCheckSenderID(t *testing.T) {
	for _, ok := range []string{"signer", "s", "0", "one-brain", "emotion_recognition", "sensor.a", strings.Repeat("s", MaxSenderID)} {
		if err := CheckSenderID(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, tc := range lookAlikes {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSenderID(tc.id)
			if err == nil {
				t.Fatalf("%q accepted", tc.id)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.mention) || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("%q: %q does not name %q in one line", tc.id, msg, tc.mention)
			}
		})
	}
}

// Every decoder refuses a look-alike sender with RuleSenderID at the
// sender's path.
func TestDecodersRefuseLookAlikeSenders(t *testing.T) {
	env := seedExamples(t, "seed000")["example1.json"]
	am := seedExamples(t, "seed001")["query.json"]
	bus := messagetest.Seed("bus/crisis.detection.jsonc")
	for _, tc := range lookAlikes {
		switch tc.name {
		case "empty", "not UTF-8", "slash":
			continue // refused by the formats' own rules first
		}
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []struct {
				codec Codec
				doc   []byte
				path  string
			}{
				{Envelope{}, mutate(t, env, set("from", "agent://"+tc.id)), "$.from"},
				{AgentMessage{}, mutate(t, am, set("from.agentId", tc.id)), "$.from.agentId"},
				{Bus{}, busMutate(t, bus, "metadata.source", tc.id), "$.metadata.source"},
			} {
				_, err := c.codec.Decode(c.doc)
				var re *RuleError
				if !errors.As(err, &re) {
					t.Fatalf("%s: %q accepted (%v)", c.codec.Format(), tc.id, err)
				}
				// The envelope's schema pattern refuses most of them first.
				if c.codec.Format() == FormatEnvelope && re.Rule == "pattern" && re.Path == c.path {
					continue
				}
				if re.Rule != RuleSenderID || re.Path != c.path {
					t.Errorf("%s: refused with %q at %q (%v), want %s at %s", c.codec.Format(), re.Rule, re.Path, err, RuleSenderID, c.path)
				}
			}
		})
	}
}

// A message from another format whose sender the target format writes
// otherwise is written in the sender grammar, and the change listed.
func TestEncodersWriteSendersInTheGrammar(t *testing.T) {
	am, err := AgentMessage{}.Decode(seedExamples(t, "seed001")["query.json"])
	if err != nil {
		t.Fatal(err)
	}
	b, lost, err := Bus{}.Encode(am)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Bus{}.Decode(b)
	if err != nil || got.From != "one-brain" || !contains(lost, "from (one-brain/ob-001 written as source one-brain)") {
		t.Fatalf("agent-message as bus: %v from %q lost %q", err, got.From, lost)
	}
	// A sender stored before the grammar (upper case, a trailing dot)
	// still renders, in the grammar.
	old := &Message{ID: "550e8400-e29b-41d4-a716-446655440000", From: "Old.Sensor.", Topic: "ops.note", Kind: "ops.note",
		Payload: json.RawMessage(`{}`), Source: FormatBus}
	for _, c := range []Codec{Envelope{}, AgentMessage{}, Bus{}} {
		b, lost, err := c.Encode(old)
		if err != nil || len(lost) == 0 {
			t.Fatalf("%s: %v lost %q", c.Format(), err, lost)
		}
		m, err := c.Decode(b)
		if err != nil || CheckSenderID(m.Sender()) != nil {
			t.Fatalf("%s: %v sender %q", c.Format(), err, m.Sender())
		}
	}
}
