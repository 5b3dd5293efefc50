package sqlite

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Every event the store writes has data exactly as json.Marshal of the
// same map would: keys sorted, strings escaped the same way. Events built
// with evData are checked by decoding and re-encoding their top level.
func TestEvDataMatchesMarshal(t *testing.T) {
	f := newFixture(t, Options{})
	// Enqueue, claim, retry, claim again, complete with a follow-up,
	// whose event carries a parent; odd characters in the strings.
	prio := 3
	rec := mustEnqueue(t, f.Store, host.TaskIntent{TaskType: "odd.type", Source: "src é €\u2028", Priority: &prio, Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{MaxAttempts: 3})
	task := mustClaim(t, f.Store, f.clock.Now())
	finishWith(t, f, task, host.FinishInput{Outcome: host.TaskOutcome{MachineStatus: host.MachineNeedsRetry}, RetryClass: host.RetryRetryable, Error: "e"})
	f.clock.Add(DefaultBackoff(1))
	task = mustClaim(t, f.Store, f.clock.Now())
	a := attemptFor(t, f.Store, task)
	if _, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome(),
		FollowUps: []host.TaskIntent{intent("child", nil)}}); err != nil {
		t.Fatal(err)
	}
	evs, err := f.Events(ctx, host.EventFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		// Nested values (follow-up intents are structs, in field order)
		// are kept as they are; the object around them is re-encoded.
		var m map[string]json.RawMessage
		if err := json.Unmarshal(e.Data, &m); err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		want, _ := json.Marshal(m)
		if !bytes.Equal(e.Data, want) {
			t.Errorf("%s data\n%s\nwant\n%s", e.Type, e.Data, want)
		}
		seen[e.Type] = true
	}
	for _, typ := range []string{host.EventTaskEnqueued, host.EventTaskClaimed, host.EventAttemptRecorded, host.EventTaskAttemptFinished, host.EventTaskRetryScheduled, host.EventTaskFinished} {
		if !seen[typ] {
			t.Errorf("no %s event was checked", typ)
		}
	}
	_ = rec
}

// message_accepted's data, built with evData, is the bytes of
// storecore.AcceptedData's map (what internal/store/postgres writes).
func TestAcceptedDataMatchesStorecore(t *testing.T) {
	conf := 0.5
	full := &host.MessageInput{MessageID: "m<1>", Hash: "h", Model: json.RawMessage(`{"a":1}`), Format: "f", Topic: "t.x", Sender: "s é",
		Origin: "api", ReplyTo: "r", SignedBy: "k", PrevHash: "p", To: "to", By: "b&c",
		Log: host.MessageLog{Direction: "in", Status: "ok", LatencyMs: 12, EvidenceCount: 3, Confidence: &conf}}
	for _, in := range []*host.MessageInput{full, {MessageID: "m", Hash: "h", Topic: "t", Sender: "s"}} {
		want, err := json.Marshal(storecore.AcceptedData(in, "default", 2))
		if err != nil {
			t.Fatal(err)
		}
		if got := acceptedData(in, "default", 2).Bytes(); !bytes.Equal(got, want) {
			t.Errorf("acceptedData:\n got %s\nwant %s", got, want)
		}
	}
}
