package message

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/message/messagetest"
)

// The examples of seed 002, copied as written (with their // comments)
// into messagetest/seeds/bus; common-envelope.jsonc is the seed's template.
func busExamples(t testing.TB) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("messagetest/seeds/bus/*.jsonc")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples: %v", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".jsonc")] = messagetest.StripLineComments(b)
	}
	return out
}

func TestBusSeedExamplesRoundTrip(t *testing.T) {
	ex := busExamples(t)
	if len(ex) != 9 {
		t.Fatalf("want the seed's 9 JSON blocks, got %d", len(ex))
	}
	var codec Codec = Bus{}
	for name, b := range ex {
		if name == "common-envelope" {
			continue // the template, see TestBusTemplateIsNotAMessage
		}
		t.Run(name, func(t *testing.T) {
			m, err := codec.Decode(b)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if m.Topic != name || m.Kind != name || m.Source != FormatBus || m.ID == "" || m.Time.IsZero() || m.From == "" {
				t.Fatalf("converted badly: %+v", m)
			}
			out, lost, err := codec.Encode(m)
			if err != nil || len(lost) != 0 {
				t.Fatalf("encode: %v lost %v", err, lost)
			}
			back, err := codec.Decode(out)
			if err != nil {
				t.Fatalf("decode again: %v", err)
			}
			if !back.Time.Equal(m.Time) {
				t.Fatalf("time %v != %v", back.Time, m.Time)
			}
			back.Time = m.Time
			if !reflect.DeepEqual(back, m) {
				t.Fatalf("round trip changed the message:\n%+v\n%+v", m, back)
			}
			var orig, again map[string]any
			_ = json.Unmarshal(b, &orig)
			_ = json.Unmarshal(out, &again)
			if !reflect.DeepEqual(orig, again) {
				t.Fatalf("encoded document differs from the example:\n%s", out)
			}
		})
	}
}

func TestBusConversion(t *testing.T) {
	ex := busExamples(t)
	cases := []struct {
		topic    string
		priority int
		ttl      time.Duration
		ids      map[string]string
	}{
		{"crisis.detection", 10, 0, map[string]string{"crisis_id": "crisis-789", "conversation_id": "conv-456", "user_id": "user-123"}},
		{"agency.initiative", 5, 59*time.Minute + 14*time.Second + 211*time.Millisecond, map[string]string{"initiative_id": "init-456", "user_id": "user-123"}},
		{"expression.coordination", 6, 0, map[string]string{"coordination_id": "coord-789"}},
		{"learning.coordination", 5, 0, map[string]string{"learning_event_id": "learn-123"}},
		{"personality.expression.decision", 5, 0, nil},
		{"llm.conversation.events", 5, 0, map[string]string{"conversation_id": "conv-789"}},
		{"llm.prompt.conditioning.request", 7, 0, map[string]string{"request_id": "req-123", "conversation_id": "conv-789"}},
		{"llm.prompt.conditioning.response", 5, 0, map[string]string{"request_id": "req-123"}},
	}
	for _, c := range cases {
		m, err := Bus{}.Decode(ex[c.topic])
		if err != nil {
			t.Fatalf("%s: %v", c.topic, err)
		}
		if m.Priority != c.priority || m.TTL != c.ttl || !reflect.DeepEqual(m.ContextIDs, c.ids) {
			t.Errorf("%s: priority %d ttl %v ids %v; want %d %v %v", c.topic, m.Priority, m.TTL, m.ContextIDs, c.priority, c.ttl, c.ids)
		}
	}
	m, _ := Bus{}.Decode(ex["crisis.detection"])
	if string(m.Extra["version"]) != `"1.0"` || m.To != "" || m.From != "emotion_recognition" {
		t.Fatalf("metadata: %+v", m)
	}
}

// A crisis message outranks every other topic whatever its guidance.
func TestBusCrisisFirst(t *testing.T) {
	ex := busExamples(t)
	low := busMutate(t, ex["crisis.detection"], "payload.response_guidance.priority", "moderate")
	m, err := Bus{}.Decode(low)
	if err != nil {
		t.Fatal(err)
	}
	top := busMutate(t, ex["agency.initiative"], "payload.priority", 1.0)
	n, err := Bus{}.Decode(top)
	if err != nil {
		t.Fatal(err)
	}
	if m.Priority != 8 || n.Priority != 7 {
		t.Fatalf("moderate crisis %d, top initiative %d", m.Priority, n.Priority)
	}
}

func TestBusTemplateIsNotAMessage(t *testing.T) {
	_, err := Bus{}.Decode(busExamples(t)["common-envelope"])
	busWantRule(t, err, "$.metadata.message_id", "uuid-string")
}

func TestBusRefusals(t *testing.T) {
	ex := busExamples(t)
	del := busDelete
	cases := []struct {
		topic, path string
		value       any
		wantPath    string
		rule        string
	}{
		{"crisis.detection", "metadata.message_id", "a1b2c3d4", "$.metadata.message_id", "uuid-string"},
		{"crisis.detection", "metadata.timestamp", "yesterday", "$.metadata.timestamp", "date-time"},
		{"crisis.detection", "metadata.message_type", "Crisis", "$.metadata.message_type", "topic.subtopic"},
		{"crisis.detection", "metadata.version", "one", "$.metadata.version", "version"},
		{"crisis.detection", "metadata.source", del, "$.metadata.source", "required"},
		{"crisis.detection", "metadata.source", 7, "$.metadata.source", "type"},
		{"crisis.detection", "metadata.priority", 7, "$.metadata.priority", "additional_property"},
		{"crisis.detection", "signature", "x", "$.signature", "additional_property"},
		{"crisis.detection", "payload", del, "$.payload", "required"},
		{"crisis.detection", "payload", []any{}, "$.payload", "type"},
		{"crisis.detection", "payload.crisis_id", del, "$.payload.crisis_id", "required"},
		{"crisis.detection", "payload.severity", 1.5, "$.payload.severity", "range"},
		{"crisis.detection", "payload.severity", "high", "$.payload.severity", "type"},
		{"crisis.detection", "payload.confidence", -0.1, "$.payload.confidence", "range"},
		{"crisis.detection", "payload.crisis_type", "", "$.payload.crisis_type", "required"},
		{"crisis.detection", "payload.detected_by.module", del, "$.payload.detected_by.module", "required"},
		{"crisis.detection", "payload.response_guidance.priority", "later", "$.payload.response_guidance.priority", "enum"},
		{"crisis.detection", "payload.escalation_path.internal_escalation", "yes", "$.payload.escalation_path.internal_escalation", "type"},
		{"crisis.detection", "payload.timeout", del, "$.payload.timeout", "required"},
		{"crisis.detection", "payload.timeout.response_deadline_ms", -1, "$.payload.timeout.response_deadline_ms", "range"},
		{"agency.initiative", "payload.initiative_id", del, "$.payload.initiative_id", "required"},
		{"agency.initiative", "payload.priority", 2, "$.payload.priority", "range"},
		{"agency.initiative", "payload.timing.flexibility", 1.1, "$.payload.timing.flexibility", "range"},
		{"agency.initiative", "payload.timing.expiration_time", "soon", "$.payload.timing.expiration_time", "date-time"},
		{"agency.initiative", "payload.success_metrics", del, "$.payload.success_metrics", "required"},
		{"expression.coordination", "payload.expression_type", "dance", "$.payload.expression_type", "enum"},
		{"expression.coordination", "payload.synchronization.transition_parameters.transition_curve", "cubic", "$.payload.synchronization.transition_parameters.transition_curve", "enum"},
		{"expression.coordination", "payload.synchronization.timing_parameters.duration_ms", -5, "$.payload.synchronization.timing_parameters.duration_ms", "range"},
		{"expression.coordination", "payload.modality_expressions", "voice", "$.payload.modality_expressions", "type"},
		{"learning.coordination", "payload.learning_type", "osmosis", "$.payload.learning_type", "enum"},
		{"learning.coordination", "payload.learning_data.user_feedback.explicit.rating", 6, "$.payload.learning_data.user_feedback.explicit.rating", "range"},
		{"learning.coordination", "payload.coordination_requirements", del, "$.payload.coordination_requirements", "required"},
		{"personality.expression.decision", "payload.ethical_framework", del, "$.payload.ethical_framework", "required"},
		{"personality.expression.decision", "payload.ethical_framework.core_principles", del, "$.payload.ethical_framework.core_principles", "required"},
		{"personality.expression.decision", "payload.ethical_framework.ethical_reasoning", del, "$.payload.ethical_framework.ethical_reasoning", "required"},
		{"llm.conversation.events", "payload.message_pair.aico_response.text", del, "$.payload.message_pair.aico_response.text", "required"},
		{"llm.conversation.events", "payload.conversation_analysis.conversation_dynamics.depth", 3, "$.payload.conversation_analysis.conversation_dynamics.depth", "range"},
		{"llm.conversation.events", "payload.learning_signals", del, "$.payload.learning_signals", "required"},
		{"llm.prompt.conditioning.request", "payload.response_parameters.priority", "urgent", "$.payload.response_parameters.priority", "enum"},
		{"llm.prompt.conditioning.request", "payload.user_message.timestamp", "now", "$.payload.user_message.timestamp", "date-time"},
		{"llm.prompt.conditioning.request", "payload.response_parameters.required_conditioning", []any{"a", 1}, "$.payload.response_parameters.required_conditioning[1]", "type"},
		{"llm.prompt.conditioning.response", "payload.source_module", del, "$.payload.source_module", "required"},
		{"llm.prompt.conditioning.response", "payload.conditioning_parameters.emotion", 1, "$.payload.conditioning_parameters.emotion", "type"},
	}
	for _, c := range cases {
		_, err := Bus{}.Decode(busMutate(t, ex[c.topic], c.path, c.value))
		busWantRule(t, err, c.wantPath, c.rule)
	}
	// The core principles are checked element by element.
	bad := busMutate(t, ex["personality.expression.decision"], "payload.ethical_framework.core_principles", []any{map[string]any{"principle": "x", "importance": "high"}})
	_, err := Bus{}.Decode(bad)
	busWantRule(t, err, "$.payload.ethical_framework.core_principles[0].importance", "type")
}

// Version 1.0 of personality.expression.decision predates the ethical
// framework; an undocumented topic keeps an opaque object payload.
func TestBusOpenTopics(t *testing.T) {
	ex := busExamples(t)
	old := busMutate(t, busMutate(t, ex["personality.expression.decision"], "metadata.version", "1.0"), "payload.ethical_framework", busDelete)
	if _, err := (Bus{}).Decode(old); err != nil {
		t.Fatalf("1.0 decision: %v", err)
	}
	other := busMutate(t, busMutate(t, ex["crisis.detection"], "metadata.message_type", "memory.consolidation"), "payload", map[string]any{"anything": 1})
	m, err := Bus{}.Decode(other)
	if err != nil || m.Topic != "memory.consolidation" || m.Priority != 5 || string(m.Payload) != `{"anything":1}` {
		t.Fatalf("undocumented topic: %v %+v", err, m)
	}
}

func TestBusOversizedAndGarbage(t *testing.T) {
	big := busMutate(t, busExamples(t)["crisis.detection"], "payload.context.recent_message", strings.Repeat("a", MaxBytes))
	_, err := Bus{}.Decode(big)
	busWantRule(t, err, "", "max_bytes")
	dup := strings.Replace(string(busExamples(t)["crisis.detection"]), `"crisis_id": "crisis-789",`, `"crisis_id": "crisis-789", "crisis_id": "crisis-790",`, 1)
	_, err = Bus{}.Decode([]byte(dup))
	busWantRule(t, err, "$.payload.crisis_id", "duplicate_key")
	bin := strings.Replace(string(busExamples(t)["crisis.detection"]), "crisis-789", "crisis-\xff", 1)
	_, err = Bus{}.Decode([]byte(bin))
	busWantRule(t, err, "", "utf-8")
	if _, _, err := (Bus{}).Encode(nil); err == nil {
		t.Fatal("nil message encoded")
	}
	for _, b := range []string{"", "null", "[]", "{", `{"metadata":null,"payload":{}}`} {
		if _, err := (Bus{}).Decode([]byte(b)); err == nil {
			t.Fatalf("%q accepted", b)
		}
	}
}

func TestBusEncodeListsLost(t *testing.T) {
	m, err := Bus{}.Decode(busExamples(t)["crisis.detection"])
	if err != nil {
		t.Fatal(err)
	}
	m.To, m.ReplyTo, m.Signature, m.PrevHash = "agent://x", "01H", "sig", "hash"
	m.Priority, m.TTL = 3, time.Minute
	m.ContextIDs = map[string]string{"session": "s"}
	m.Extra["intent"] = json.RawMessage(`"query"`)
	_, lost, err := Bus{}.Encode(m)
	want := []string{"to", "reply_to", "signature", "prev_hash", "extra.intent", "priority", "ttl", "context_ids"}
	if err != nil || !reflect.DeepEqual(lost, want) {
		t.Fatalf("lost %v err %v, want %v", lost, err, want)
	}
	// An intent or message type is a topic of the agent; a message the
	// format cannot express is refused, not rendered.
	m.Topic = "query"
	b, lost, err := Bus{}.Encode(m)
	if back, derr := (Bus{}).Decode(b); err != nil || derr != nil || back.Topic != "agent.query" || !strings.Contains(strings.Join(lost, ","), "(query written as message_type agent.query)") {
		t.Fatalf("topic query: %s lost %q: %v %v", b, lost, err, derr)
	}
	m.Topic = "Query"
	_, _, err = Bus{}.Encode(m)
	busWantRule(t, err, "$.metadata.message_type", "topic.subtopic")
}

func FuzzDecodeBus(f *testing.F) {
	for _, b := range busExamples(f) {
		f.Add(b)
	}
	f.Add([]byte(`{"metadata":{},"payload":{}}`))
	for _, b := range senderSeeds(f, busExamples(f)["crisis.detection"], "metadata.source", "") {
		f.Add(b)
	}
	// Keys a path must quote and clip (found by fuzzing: a raw newline in
	// the refusal).
	f.Add([]byte(`{"metadata":{"\n":1},"payload":{}}`))
	f.Add([]byte(`{"metadata":{"` + strings.Repeat("k", 600) + `":1},"payload":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Bus{}.Decode(b)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) || strings.ContainsAny(err.Error(), "\n\r") || len(err.Error()) > 512 {
				t.Fatalf("bad error: %q", err)
			}
			return
		}
		out, lost, err := Bus{}.Encode(m)
		if err != nil || len(lost) != 0 {
			t.Fatalf("accepted message does not encode: %v, lost %v", err, lost)
		}
		back, err := Bus{}.Decode(out)
		if err != nil {
			t.Fatalf("encoded message refused: %v", err)
		}
		if !back.Time.Equal(m.Time) {
			t.Fatalf("time changed: %v %v", m.Time, back.Time)
		}
		back.Time = m.Time
		if !reflect.DeepEqual(back, m) {
			t.Fatalf("round trip changed the message:\n%+v\n%+v", m, back)
		}
	})
}

// busDelete as a busMutate value removes the member.
var busDelete = &struct{}{}

// busMutate sets (or deletes) the dotted path of a JSON document.
func busMutate(t testing.TB, b []byte, path string, value any) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := strings.Split(path, ".")
	cur := doc
	for _, k := range keys[:len(keys)-1] {
		next, ok := cur[k].(map[string]any)
		if !ok {
			t.Fatalf("no object at %s in %s", k, path)
		}
		cur = next
	}
	if value == busDelete {
		delete(cur, keys[len(keys)-1])
	} else {
		cur[keys[len(keys)-1]] = value
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func busWantRule(t *testing.T, err error, path, rule string) {
	t.Helper()
	var re *RuleError
	if !errors.As(err, &re) {
		t.Fatalf("want %s at %q, got %v", rule, path, err)
	}
	if re.Path != path || re.Rule != rule || re.Format != FormatBus || strings.Contains(err.Error(), "\n") {
		t.Fatalf("want %s at %q, got %v", rule, path, err)
	}
}

// BenchmarkDecodeBus decodes the seed's largest example (learning.coordination).
func BenchmarkDecodeBus(b *testing.B) {
	data := busExamples(b)["learning.coordination"]
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		if _, err := (Bus{}).Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
