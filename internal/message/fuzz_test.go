package message

import (
	"errors"
	"strings"
	"testing"
)

// fuzzDecode checks a decoder never panics, refuses with one bounded line,
// and that what it accepts encodes back to a document it accepts again.
func fuzzDecode(f *testing.F, c Codec, dir string) {
	for _, b := range seedExamples(f, dir) {
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

func FuzzDecodeEnvelope(f *testing.F) { fuzzDecode(f, Envelope{}, "seed000") }

func FuzzDecodeAgentMessage(f *testing.F) { fuzzDecode(f, AgentMessage{}, "seed001") }
