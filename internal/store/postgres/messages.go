package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// messageSeq: a message's seq, its list cursor, is its
// message_accepted event's seq (event_seq), assigned when its transaction
// links its chain entries under the chain lock: cursors then follow
// commit order across nodes, and a reader paging with one never skips a
// message committed late with a smaller one (as an identity column's
// values, taken at insert, would let it).
const messageSeq = "event_seq"

// The message rules are storecore's (messages.go); a message's seq is its
// message_accepted event's (messageSeq).

// PublishMessage implements host.Messages.
func (s *Store) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	const op = "publish message"
	if err := storecore.CheckMessageInput(op, in); err != nil {
		return nil, err
	}
	var out *host.MessageReceipt
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, err = storecore.ApplyMessage(ctx, coreTx{x}, in, "", "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.MessageID, err)
	}
	if out.Message.EventSeq <= 0 {
		// A duplicate of a message accepted in the same transaction, or
		// in one whose entries were pending when it was read: its seq is
		// assigned now (this write waited for a link pass begun after its
		// commit), so read it again.
		m, err := s.Message(ctx, in.Tenant, in.MessageID)
		if err != nil {
			return nil, err
		}
		out.Message = m
	}
	return out, nil
}

// applyPublished accepts the messages an attempt published, when its task
// completes (storecore.ApplyPublished).
func (x *tx) applyPublished(ctx context.Context, msgs []host.MessageInput, tenant, taskID, attemptID string, now time.Time) error {
	return storecore.ApplyPublished(ctx, coreTx{x}, msgs, tenant, taskID, attemptID, now)
}

func (coreTx) MessageSeq() string { return messageSeq }

// ClaimMessage inserts rec's row, with no seq yet, unless another node's
// message holds its id.
func (c coreTx) ClaimMessage(ctx context.Context, in *host.MessageInput, rec *host.MessageRecord, expires string) (bool, error) {
	tag, err := c.x.Exec(ctx, `INSERT INTO messages (tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
		priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 0)
		ON CONFLICT (tenant, message_id) DO NOTHING`,
		rec.Tenant, in.MessageID, in.Format, string(in.Document), string(in.Model), in.Hash, in.Sender, in.To, in.Topic, in.Kind,
		in.ReplyTo, in.Priority, expires, in.PrevHash, in.SignedBy, in.Origin, ts(rec.AcceptedAt))
	return tag.RowsAffected() == 1, err
}

// AcceptMessage appends the message_accepted event; its seq, the
// message's, is its pend id's negative until the linker gives it its
// place, and the message's cursor with it (link.go).
func (c coreTx) AcceptMessage(_ context.Context, in *host.MessageInput, rec *host.MessageRecord, _ string, deliveries int, taskID, attemptID string) error {
	e, err := c.x.event(host.EventMessageAccepted, taskID, attemptID, storecore.AcceptedData(in, rec.Tenant, deliveries))
	if err != nil {
		return err
	}
	c.x.after = append(c.x.after, func(b *pgx.Batch) {
		b.Queue(`UPDATE messages SET event_seq = $1 WHERE tenant = $2 AND message_id = $3`, e.Seq, rec.Tenant, in.MessageID)
	})
	c.x.onLinked(func() { rec.Seq, rec.EventSeq = e.Seq, e.Seq })
	return nil
}

func (c coreTx) InsertTaskBy(ctx context.Context, t *host.TaskRecord, attemptID string) error {
	return c.x.insertTask(ctx, t, attemptID)
}

// MessageSubscriptions reads the subscriptions for every message (no
// cache: another node may have changed them).
func (c coreTx) MessageSubscriptions(ctx context.Context) ([]host.Subscription, error) {
	return storecore.Subscriptions(ctx, c)
}

// Message implements host.Messages.
func (s *Store) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	m, err := storecore.LoadMessage(ctx, corePool{s.pool}, messageSeq, storecore.TenantOr(tenant), id)
	if err != nil {
		return nil, host.Wrap("message", id, err)
	}
	return m, nil
}

// ListMessages implements host.Messages.
func (s *Store) ListMessages(ctx context.Context, q host.MessageQuery) (*host.MessagePage, error) {
	return storecore.ListMessages(ctx, corePool{s.pool}, messageSeq, q)
}

// subscriptionsLock is the advisory lock key space of one pack's
// subscriptions (hashtextextended of the pack's name, seeded with it).
const subscriptionsLock = 0x7061636b72756e10

// SetPackSubscriptions implements host.Messages. The pack's subscriptions
// are replaced whole under a transaction-level advisory lock on the
// pack's name, so that two nodes replacing them at once take turns.
func (s *Store) SetPackSubscriptions(ctx context.Context, pack string, subs []host.Subscription) error {
	const op = "set subscriptions"
	if err := storecore.CheckSubscriptions(op, pack, subs); err != nil {
		return err
	}
	err := s.write(ctx, func(x *tx) error {
		if _, err := x.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, $2))`, pack, int64(subscriptionsLock)); err != nil {
			return err
		}
		return storecore.ReplaceSubscriptions(ctx, coreTx{x}, pack, subs)
	})
	return host.Wrap(op, pack, err)
}

// Subscriptions implements host.Messages.
func (s *Store) Subscriptions(ctx context.Context) ([]host.Subscription, error) {
	out, err := storecore.Subscriptions(ctx, corePool{s.pool})
	if err != nil {
		return nil, host.Wrap("subscriptions", "", err)
	}
	return out, nil
}

// ExpireMessages implements host.Messages (storecore.ExpireMessages:
// several nodes may expire at once).
func (s *Store) ExpireMessages(ctx context.Context, now time.Time) (int, error) {
	const op = "expire messages"
	if now.IsZero() {
		now = s.now()
	}
	if due, err := storecore.AnyExpiring(ctx, corePool{s.pool}, now); !due || err != nil {
		return 0, host.Wrap(op, "", err)
	}
	n := 0
	err := s.write(ctx, func(x *tx) error {
		var err error
		n, err = storecore.ExpireMessages(ctx, coreTx{x}, now)
		return err
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	return n, nil
}

// Verifying the chain's messages (VerifyChain, verify.go): chainQuery
// joins each message_accepted event with the message its data names, read
// with these columns, so that the walk needs no other query.

// messageJoin joins the message a message_accepted event e names (the
// CASEs keep other events' data, which may be empty, from being read as JSON).
const messageJoin = ` LEFT JOIN messages m
	ON m.tenant = CASE WHEN e.type = 'message_accepted' THEN e.data::jsonb ->> 'tenant' END
	AND m.message_id = CASE WHEN e.type = 'message_accepted' THEN e.data::jsonb ->> 'message_id' END`

// messageJoinColumns are the joined message's columns (NULL if none).
const messageJoinColumns = `m.message_id IS NOT NULL, coalesce(m.document, ''), coalesce(m.model, ''), coalesce(m.hash, ''), coalesce(m.event_seq, 0)`

// joinedMessage receives messageJoinColumns.
type joinedMessage struct {
	found bool
	m     host.MessageRecord
	doc   string
	model string
}

func (j *joinedMessage) dest() []any {
	return []any{&j.found, &j.doc, &j.model, &j.m.Hash, &j.m.EventSeq}
}

// record is the joined message, nil if none.
func (j *joinedMessage) record() *host.MessageRecord {
	if !j.found {
		return nil
	}
	m := j.m
	m.Document, m.Model = json.RawMessage(j.doc), json.RawMessage(j.model)
	return &m
}
