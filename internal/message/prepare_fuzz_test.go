package message

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
	"github.com/packrun/packrun/internal/strictjson"
)

// FuzzPublishRequest feeds untrusted request bodies through what the API
// and message_publish do with them: ParseRequest, Prepare, and rendering
// an accepted message in every format. Nothing may panic; an accepted
// message's hash is its canonical form's and renders back unchanged.
func FuzzPublishRequest(f *testing.F) {
	for _, name := range []string{"seed000/example1.json", "seed001/response.json", "bus/crisis.detection.jsonc"} {
		doc := messagetest.Seed(name)
		format := map[string]string{"seed000": "agent-envelope", "seed001": "agent-message", "bus/cri": "bus-envelope"}[name[:7]]
		form, _ := json.Marshal(map[string]any{"format": format, "message": json.RawMessage(doc)})
		f.Add("", form)
		f.Add("application/json; profile="+format, doc)
	}
	f.Add("", []byte(`{"format":"agent-envelope","message":{"id":1}}`))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		r, err := ParseRequest(ct, body)
		if err != nil {
			return
		}
		in, err := Prepare(ctx, r, Options{Now: time.Now(), Topics: []string{"*"}})
		if err != nil {
			return
		}
		canon, err := Canonical(r.Document)
		if err != nil || Hash(canon) != in.Hash {
			t.Fatalf("hash %s is not the canonical form's (%v)", in.Hash, err)
		}
		rec := &host.MessageRecord{Format: in.Format, Document: in.Document, Model: in.Model}
		for _, f := range []string{"agent-envelope", "agent-message", "bus-envelope"} {
			fm, _ := ParseFormat(f)
			Render(rec, fm)
		}
	})
}

// FuzzCanonical checks the streaming canonical form against the one made
// from a decoded tree, on every strictly valid JSON object.
func FuzzCanonical(f *testing.F) {
	for _, name := range []string{"seed000/example1.json", "seed001/response.json", "bus/crisis.detection.jsonc"} {
		f.Add(messagetest.Seed(name))
	}
	f.Add([]byte(`{"b":[1.0,2e2,-0,"\u001f<>\ud83d\ude00"],"a":{"z":null,"y":true},"signature":"x","\u20ac":1e21}`))
	f.Add([]byte(`{"signature":1}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if strictjson.Check(doc, 64) != nil {
			return
		}
		got, err := Canonical(doc)
		want, werr := canonicalTree(doc)
		if (err == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("streaming %q (%v), tree %q (%v)", got, err, want, werr)
		}
	})
}
