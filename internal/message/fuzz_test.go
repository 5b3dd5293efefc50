package message

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// fuzzDecode checks a decoder never panics, refuses with one bounded line,
// and that what it accepts encodes back to a document it accepts again.
func fuzzDecode(f *testing.F, c Codec, dir string, extra ...[]byte) {
	for _, b := range seedExamples(f, dir) {
		f.Add(b)
	}
	for _, b := range extra {
		f.Add(b)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"a","id":"b"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := c.Decode(b)
		if err != nil {
			var re *RuleError
			if !errors.As(err, &re) {
				t.Fatalf("not a *RuleError: %T %v", err, err)
			}
			if msg := err.Error(); len(msg) > 400 || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error is not one bounded line (%d bytes): %q", len(msg), msg)
			}
			return
		}
		out, lost, err := c.Encode(m)
		if err != nil || len(lost) != 0 {
			t.Fatalf("accepted message does not encode back: %v, lost %v", err, lost)
		}
		if _, err := c.Decode(out); err != nil {
			t.Fatalf("re-encoded message refused: %v\n%s", err, out)
		}
	})
}

func FuzzDecodeEnvelope(f *testing.F) {
	fuzzDecode(f, Envelope{}, "seed000", senderSeeds(f, seedExamples(f, "seed000")["example1.json"], "from", "agent://")...)
}

func FuzzDecodeAgentMessage(f *testing.F) {
	fuzzDecode(f, AgentMessage{}, "seed001", senderSeeds(f, seedExamples(f, "seed001")["query.json"], "from.agentId", "")...)
}

// senderSeeds are doc with the sender at path set to each look-alike of
// "signer" (and to "signer" itself), prefixed.
func senderSeeds(tb testing.TB, doc []byte, path, prefix string) [][]byte {
	var out [][]byte
	for _, id := range append([]string{"signer"}, lookAlikeIDs()...) {
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			tb.Fatal(err)
		}
		keys := strings.Split(path, ".")
		cur := m
		for _, k := range keys[:len(keys)-1] {
			cur = cur[k].(map[string]any)
		}
		cur[keys[len(keys)-1]] = prefix + id
		b, err := json.Marshal(m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func lookAlikeIDs() []string {
	ids := make([]string, len(lookAlikes))
	for i, l := range lookAlikes {
		ids[i] = l.id
	}
	return ids
}
