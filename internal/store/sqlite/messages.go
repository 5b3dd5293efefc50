package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// messageSeq is the column that is a message's seq: its row's.
const messageSeq = "seq"

const messageColumns = messageSeq + ", " + storecore.MessageColumns

// The message rules are storecore's (messages.go), run in the writer's
// transaction (coreTx); a message's seq is its row's (messageSeq).

// PublishMessage implements host.Messages.
func (s *Store) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	const op = "publish message"
	if err := storecore.CheckMessageInput(op, in); err != nil {
		return nil, err
	}
	var out *host.MessageReceipt
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = storecore.ApplyMessage(ctx, coreTx{s, tx}, in, "", "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.MessageID, err)
	}
	return out, nil
}

// applyPublished accepts the messages an attempt published, when its task
// completes (storecore.ApplyPublished).
func (s *Store) applyPublished(tx *wtx, msgs []host.MessageInput, tenant, taskID, attemptID string, now time.Time) error {
	return storecore.ApplyPublished(context.Background(), coreTx{s, tx}, msgs, tenant, taskID, attemptID, now)
}

func (coreTx) MessageSeq() string { return messageSeq }

// ClaimMessage claims nothing: under the single writer no other can
// accept the id since ApplyMessage found it free; AcceptMessage inserts
// the row, once the event that gives it its event_seq is appended.
func (coreTx) ClaimMessage(context.Context, *host.MessageInput, *host.MessageRecord, string) (bool, error) {
	return true, nil
}

func (c coreTx) AcceptMessage(_ context.Context, in *host.MessageInput, rec *host.MessageRecord, expires string, deliveries int, taskID, attemptID string) error {
	e, err := c.s.eventData(c.tx, host.EventMessageAccepted, taskID, attemptID, acceptedData(in, rec.Tenant, deliveries))
	if err != nil {
		return err
	}
	if _, err := c.tx.Exec(`INSERT INTO messages (`+messageColumns+`) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		rec.Tenant, in.MessageID, in.Format, string(in.Document), string(in.Model), in.Hash, in.Sender, in.To, in.Topic, in.Kind,
		in.ReplyTo, in.Priority, expires, in.PrevHash, in.SignedBy, in.Origin, ts(rec.AcceptedAt), e.Seq); err != nil {
		return err
	}
	rec.EventSeq = e.Seq
	return c.tx.QueryRow(`SELECT last_insert_rowid()`).Scan(&rec.Seq)
}

func (c coreTx) InsertTaskBy(_ context.Context, t *host.TaskRecord, attemptID string) error {
	return c.s.insertTask(c.tx, t, attemptID)
}

// acceptedData is storecore.AcceptedData, appended in the keys' sorted
// order: the same bytes (TestAcceptedDataMatchesStorecore) without
// marshalling a map inside the writer.
func acceptedData(in *host.MessageInput, tenant string, deliveries int) *storecore.EventData {
	d := &storecore.EventData{}
	if in.By != "" {
		d.Str("by", in.By)
	}
	if in.Log.Confidence != nil {
		d.Value("confidence", *in.Log.Confidence)
	}
	d.Int("deliveries", int64(deliveries)).Str("direction", in.Log.Direction).Int("evidence_count", int64(in.Log.EvidenceCount)).
		Str("format", in.Format).Str("hash", in.Hash).Int("latency_ms", in.Log.LatencyMs).Str("message_id", in.MessageID).
		Str("model_hash", host.ContentHash(in.Model)).Str("origin", in.Origin)
	optional := func(k, v string) {
		if v != "" {
			d.Str(k, v)
		}
	}
	optional("prev_hash", in.PrevHash)
	optional("reply_to", in.ReplyTo)
	d.Str("sender", in.Sender)
	optional("signed_by", in.SignedBy)
	d.Str("status", in.Log.Status).Str("tenant", tenant)
	optional("to", in.To)
	d.Str("topic", in.Topic)
	return d
}

// subsCache keeps the subscription table, read once per change: every
// message looks it up. It is coherent through the routes generation, which
// SetPackSubscriptions touches (see genCache).
type subsCache = genCache[struct{}, []host.Subscription]

func newSubsCache(g gen) *subsCache {
	return newGenCache(g, 16<<20, func(_ struct{}, subs []host.Subscription) int { return len(subs) })
}

// MessageSubscriptions reads the subscriptions through subsCache.
func (c coreTx) MessageSubscriptions(ctx context.Context) ([]host.Subscription, error) {
	now := time.Now()
	all, ok, g := c.s.subs.lookup(struct{}{}, now)
	if ok {
		return all, nil
	}
	all, err := storecore.Subscriptions(ctx, c)
	if err != nil {
		return nil, err
	}
	c.s.subs.store(struct{}{}, all, g, now)
	return all, nil
}

// Message implements host.Messages.
func (s *Store) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	m, err := storecore.LoadMessage(ctx, coreDB{s}, messageSeq, storecore.TenantOr(tenant), id)
	if err != nil {
		return nil, host.Wrap("message", id, err)
	}
	return m, nil
}

// ListMessages implements host.Messages.
func (s *Store) ListMessages(ctx context.Context, q host.MessageQuery) (*host.MessagePage, error) {
	return storecore.ListMessages(ctx, coreDB{s}, messageSeq, q)
}

// SetPackSubscriptions implements host.Messages.
func (s *Store) SetPackSubscriptions(ctx context.Context, pack string, subs []host.Subscription) error {
	const op = "set subscriptions"
	if err := storecore.CheckSubscriptions(op, pack, subs); err != nil {
		return err
	}
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes)
		return storecore.ReplaceSubscriptions(ctx, coreTx{s, tx}, pack, subs)
	})
	return host.Wrap(op, pack, err)
}

// Subscriptions implements host.Messages.
func (s *Store) Subscriptions(ctx context.Context) ([]host.Subscription, error) {
	out, err := storecore.Subscriptions(ctx, coreDB{s})
	return out, host.Wrap("subscriptions", "", err)
}

// ExpireMessages implements host.Messages (storecore.ExpireMessages).
func (s *Store) ExpireMessages(ctx context.Context, now time.Time) (int, error) {
	const op = "expire messages"
	if now.IsZero() {
		now = s.now()
	}
	if due, err := storecore.AnyExpiring(ctx, coreDB{s}, now); !due || err != nil {
		return 0, host.Wrap(op, "", err)
	}
	n := 0
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		n, err = storecore.ExpireMessages(ctx, coreTx{s, tx}, now)
		return err
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	return n, nil
}

// chainedMessage reads the message a message_accepted event names, nil
// if none is stored.
func (s *Store) chainedMessage(ctx context.Context, e *host.Event) (*host.MessageRecord, error) {
	var d storecore.AcceptedRef
	_ = json.Unmarshal(e.Data, &d) // not JSON: no message is found, which CheckAcceptedMessage reports
	m, err := storecore.ScanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE tenant = ? AND message_id = ?`, d.Tenant, d.MessageID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return m, err
}
