package postgres

import (
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// VerifyChain re-hashes each accepted message against its
// message_accepted event: a message changed, removed, or inserted behind
// the chain's back breaks the chain, naming it.
func TestVerifyChainMessages(t *testing.T) {
	build := func(t *testing.T) (*Store, []*host.MessageRecord) {
		s := nodes(t, 1, nil)[0]
		var out []*host.MessageRecord
		prev := messagetest.ZeroHash
		for n := 1; n <= 3; n++ {
			in, err := message.Prepare(ctx, &message.Request{Format: message.FormatEnvelope, Document: messagetest.Envelope(n, "alice", "flag", prev)},
				message.Options{Origin: "api", Now: time.Now()})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.PublishMessage(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			if r.Message.EventSeq == 0 {
				t.Fatalf("receipt without its event: %+v", r.Message)
			}
			out, prev = append(out, r.Message), in.Hash
		}
		if rep := verify(t, s); rep.Messages != 3 {
			t.Fatalf("the chain covers %d messages, want 3", rep.Messages)
		}
		return s, out
	}
	broken := func(t *testing.T, s *Store, seq int64, problem, messageID string) {
		t.Helper()
		rep, err := s.VerifyChain(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK || rep.Broken.Problem != problem || rep.Broken.Seq != seq || rep.Broken.MessageID != messageID {
			t.Fatalf("report %+v %+v, want %s of %s at %d", rep, rep.Broken, problem, messageID, seq)
		}
	}
	t.Run("document changed", func(t *testing.T) {
		s, ms := build(t)
		tamper(t, s, `UPDATE messages SET document = replace(document, 'flag', 'flog') WHERE message_id = $1`, ms[1].MessageID)
		broken(t, s, ms[1].EventSeq, host.BreakMessageHash, ms[1].MessageID)
	})
	t.Run("message removed", func(t *testing.T) {
		s, ms := build(t)
		tamper(t, s, `DELETE FROM messages WHERE message_id = $1`, ms[2].MessageID)
		broken(t, s, ms[2].EventSeq, host.BreakMessageMissing, ms[2].MessageID)
	})
	t.Run("message inserted", func(t *testing.T) {
		s, ms := build(t)
		tamper(t, s, `INSERT INTO messages (tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
			priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq)
			SELECT tenant, 'm-forged', format, document, model, hash, sender, recipient, topic, kind, reply_to,
			priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq FROM messages WHERE message_id = $1`, ms[0].MessageID)
		broken(t, s, 0, host.BreakMessageUnchain, "m-forged")
	})
}

// One message published by many callers of one store at once (their
// writes batched in one transaction, likely): one is accepted, the others
// are its duplicates, and every receipt names the accepting event.
func TestPublishSameMessageAtOnce(t *testing.T) {
	s := nodes(t, 1, nil)[0]
	const callers = 16
	receipts := make([]*host.MessageReceipt, callers)
	race(repeatStore(s, callers), func(i int, s *Store) {
		in, err := message.Prepare(ctx, &message.Request{Format: message.FormatBus, Document: messagetest.Crisis(messagetest.BusID(1), "emotion_recognition")},
			message.Options{Origin: "api", Now: time.Now()})
		if err == nil {
			receipts[i], err = s.PublishMessage(ctx, in)
		}
		if err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		return
	}
	fresh := 0
	for _, r := range receipts {
		if !r.Duplicate {
			fresh++
		}
		if r.Message.EventSeq == 0 || r.Message.EventSeq != receipts[0].Message.EventSeq {
			t.Fatalf("receipt names event %d, another %d", r.Message.EventSeq, receipts[0].Message.EventSeq)
		}
	}
	if fresh != 1 {
		t.Fatalf("%d callers' messages accepted, want 1", fresh)
	}
	verify(t, s)
}

func repeatStore(s *Store, n int) []*Store {
	out := make([]*Store, n)
	for i := range out {
		out[i] = s
	}
	return out
}
