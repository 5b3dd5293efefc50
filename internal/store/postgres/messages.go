package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// messageColumns: a message's seq, its list cursor, is its
// message_accepted event's seq (event_seq), assigned when its transaction
// links its chain entries under the chain lock: cursors then follow
// commit order across nodes, and a reader paging with one never skips a
// message committed late with a smaller one (as an identity column's
// values, taken at insert, would let it).
const messageColumns = `event_seq, tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
	priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq`

// PublishMessage implements host.Messages.
func (s *Store) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	const op = "publish message"
	if err := storecore.CheckMessageInput(op, in); err != nil {
		return nil, err
	}
	var out *host.MessageReceipt
	var accepted *host.Event
	err := s.write(ctx, func(x *tx) error {
		var err error
		out, accepted, err = x.applyMessage(ctx, in, "", "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.MessageID, err)
	}
	switch {
	case accepted != nil:
		// Its seq was assigned when the transaction linked its entries.
		out.Message.Seq, out.Message.EventSeq = accepted.Seq, accepted.Seq
	case out.Message.EventSeq == 0:
		// A duplicate of a message accepted in the same transaction,
		// read before the seqs were assigned: read it again.
		m, err := s.Message(ctx, in.Tenant, in.MessageID)
		if err != nil {
			return nil, err
		}
		out.Message = m
	}
	return out, nil
}

// applyMessage accepts one message (see host.Messages.PublishMessage) and
// returns its receipt and its message_accepted event (nil for a
// duplicate), whose seq, the message's Seq and EventSeq, is assigned when
// the transaction links its chain entries. taskID and attemptID, if any,
// name the attempt that published it.
//
// Across nodes: the sender's chain head row is locked first (created
// empty if the sender has none: an empty hash), so that one sender's messages
// are accepted one at a time, each checked against the head the previous
// one left; the message id is then looked up, and claimed by an insert
// that does nothing if another node has accepted that id meanwhile (the
// same id from another sender, whose chain row is another). Nothing but
// an empty head row is written before the message is known to be
// accepted.
func (x *tx) applyMessage(ctx context.Context, in *host.MessageInput, taskID, attemptID string, now time.Time) (*host.MessageReceipt, *host.Event, error) {
	tenant := storecore.TenantOr(in.Tenant)
	head, err := x.lockChainHead(ctx, tenant, in.Sender)
	if err != nil {
		return nil, nil, err
	}
	if r, err := x.duplicateMessage(ctx, in, tenant, taskID, attemptID); r != nil || err != nil {
		return r, nil, err
	}
	if err := storecore.CheckChainHead(in, head.hash != "", head.hash, head.messageID, head.chained); err != nil {
		return nil, nil, err
	}
	rec := storecore.AcceptedRecord(in, tenant, now)
	expires := ""
	if rec.ExpiresAt != nil {
		expires = ts(*rec.ExpiresAt)
	}
	tag, err := x.Exec(ctx, `INSERT INTO messages (tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
		priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 0)
		ON CONFLICT (tenant, message_id) DO NOTHING`,
		tenant, in.MessageID, in.Format, string(in.Document), string(in.Model), in.Hash, in.Sender, in.To, in.Topic, in.Kind,
		in.ReplyTo, in.Priority, expires, in.PrevHash, in.SignedBy, in.Origin, ts(now))
	if err == nil && tag.RowsAffected() == 0 {
		// Accepted meanwhile by another node, from another sender.
		r, err := x.duplicateMessage(ctx, in, tenant, taskID, attemptID)
		if r == nil && err == nil {
			err = fmt.Errorf("message %s: its id is taken but no message has it", in.MessageID)
		}
		return r, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	if _, err := x.Exec(ctx, `UPDATE message_chains SET hash = $3, message_id = $4, chained = chained OR $5 WHERE tenant = $1 AND sender = $2`,
		tenant, in.Sender, in.Hash, in.MessageID, in.PrevHash != ""); err != nil {
		return nil, nil, err
	}
	subs, err := x.matchingSubscriptions(ctx, in.Topic)
	if err != nil {
		return nil, nil, err
	}
	e, err := x.event(host.EventMessageAccepted, taskID, attemptID, storecore.AcceptedData(in, tenant, len(subs)))
	if err != nil {
		return nil, nil, err
	}
	// The event's seq is known when the entries are linked (flush).
	x.after = append(x.after, func(b *pgx.Batch) {
		b.Queue(`UPDATE messages SET event_seq = $1 WHERE tenant = $2 AND message_id = $3`, e.Seq, tenant, in.MessageID)
	})
	for _, sub := range subs {
		task, err := x.deliver(ctx, in, tenant, sub, expires, attemptID, now)
		if err != nil {
			return nil, nil, err
		}
		rec.Deliveries = append(rec.Deliveries, host.Delivery{Subscriber: sub.Node, TaskID: task.TaskID, Status: host.DeliveryQueued, TaskStatus: task.Status})
	}
	return &host.MessageReceipt{Message: rec}, e, nil
}

// chainHead is a sender's chain head as stored: an empty hash if the sender
// has no accepted message yet.
type chainHead struct {
	hash, messageID string
	chained         bool
}

// lockChainHead locks the row of the sender's chain head, inserting an
// empty one first if the sender has none.
func (x *tx) lockChainHead(ctx context.Context, tenant, sender string) (*chainHead, error) {
	if _, err := x.Exec(ctx, `INSERT INTO message_chains (tenant, sender, hash, message_id, chained) VALUES ($1, $2, '', '', false)
		ON CONFLICT (tenant, sender) DO NOTHING`, tenant, sender); err != nil {
		return nil, err
	}
	var h chainHead
	err := x.QueryRow(ctx, `SELECT hash, message_id, chained FROM message_chains WHERE tenant = $1 AND sender = $2 FOR UPDATE`,
		tenant, sender).Scan(&h.hash, &h.messageID, &h.chained)
	return &h, err
}

// duplicateMessage looks up the tenant's message of in's id: if there is
// one, in is its duplicate (event message_duplicate, and its receipt) or,
// with another hash, a conflict; if not, both results are nil.
func (x *tx) duplicateMessage(ctx context.Context, in *host.MessageInput, tenant, taskID, attemptID string) (*host.MessageReceipt, error) {
	var hash string
	err := x.QueryRow(ctx, `SELECT hash FROM messages WHERE tenant = $1 AND message_id = $2`, tenant, in.MessageID).Scan(&hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case hash != in.Hash:
		return nil, storecore.MessageConflict(in, hash)
	}
	if _, err := x.event(host.EventMessageDuplicate, taskID, attemptID, storecore.DuplicateData(in, tenant, hash)); err != nil {
		return nil, err
	}
	rec, err := loadMessage(ctx, x, x, tenant, in.MessageID)
	return &host.MessageReceipt{Message: rec, Duplicate: true}, err
}

// matchingSubscriptions returns the subscriptions one of whose patterns
// matches topic, by pack and node. They are read from the database for
// every message (no cache: another node may have changed them).
func (x *tx) matchingSubscriptions(ctx context.Context, topic string) ([]host.Subscription, error) {
	all, err := subscriptions(ctx, x)
	if err != nil {
		return nil, err
	}
	var out []host.Subscription
	for _, sub := range all {
		if abi.MatchAnyTopic(sub.Topics, topic) {
			out = append(out, sub)
		}
	}
	return out, nil
}

// rowsQueryer runs queries: a write transaction (*tx) or the pool.
type rowsQueryer interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// subscriptions reads every subscription, by pack and node.
func subscriptions(ctx context.Context, q rowsQueryer) ([]host.Subscription, error) {
	rows, err := q.Query(ctx, `SELECT pack, node, task_type, topics FROM message_subscriptions ORDER BY pack, node`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.Subscription, error) {
		var sub host.Subscription
		var topics string
		if err := r.Scan(&sub.Pack, &sub.Node, &sub.TaskType, &topics); err != nil {
			return sub, err
		}
		return sub, json.Unmarshal([]byte(topics), &sub.Topics)
	})
}

// deliver creates sub's task for the message and its delivery row.
func (x *tx) deliver(ctx context.Context, in *host.MessageInput, tenant string, sub host.Subscription, expires, attemptID string, now time.Time) (*host.TaskRecord, error) {
	intent, err := storecore.DeliveryIntent(in, sub)
	if err != nil {
		return nil, err
	}
	t, err := storecore.NewTask("deliver message", intent, 0, now)
	if err != nil {
		return nil, err
	}
	t.Tenant = tenant
	if err := x.insertTask(ctx, t, attemptID); err != nil {
		return nil, err
	}
	if _, err := x.Exec(ctx, `INSERT INTO message_deliveries (tenant, message_id, subscriber, task_id, status, expires_at) VALUES ($1, $2, $3, $4, 'queued', $5)`,
		tenant, in.MessageID, sub.Node, t.TaskID, expires); err != nil {
		return nil, err
	}
	_, err = x.event(host.EventMessageDelivered, t.TaskID, attemptID, map[string]any{
		"message_id": in.MessageID, "subscriber": sub.Node, "pack": sub.Pack, "topic": in.Topic, "priority": t.Priority})
	return t, err
}

// applyPublished accepts the messages an attempt published, when its task
// completes: one the bus refuses (out of its sender's chain, an id reused
// with other content, invalid) is left out with a message_refused event.
// A refused message leaves nothing behind but, for a sender never seen
// before, its empty chain head row (see applyMessage).
func (x *tx) applyPublished(ctx context.Context, msgs []host.MessageInput, tenant, taskID, attemptID string, now time.Time) error {
	for i := range msgs {
		in := &msgs[i]
		in.Tenant = tenant
		err := storecore.CheckMessageInput("publish message", in)
		if err == nil {
			if _, _, err = x.applyMessage(ctx, in, taskID, attemptID, now); err == nil {
				continue
			}
			if !errors.Is(err, host.ErrValidation) && !errors.Is(err, host.ErrConflict) {
				return err
			}
		}
		if _, err := x.event(host.EventMessageRefused, taskID, attemptID, map[string]any{
			"message_id": in.MessageID, "topic": in.Topic, "origin": in.Origin, "detail": err.Error()}); err != nil {
			return err
		}
	}
	return nil
}

// loadMessage reads one message with its deliveries.
func loadMessage(ctx context.Context, q queryRower, qs rowsQueryer, tenant, id string) (*host.MessageRecord, error) {
	m, err := storecore.ScanMessage(q.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages WHERE tenant = $1 AND message_id = $2`, tenant, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("message", id, host.ErrNotFound, "no message %s", id)
	}
	if err != nil {
		return nil, err
	}
	m.Deliveries, err = loadDeliveries(ctx, qs, tenant, id)
	return m, err
}

func loadDeliveries(ctx context.Context, q rowsQueryer, tenant, id string) ([]host.Delivery, error) {
	rows, err := q.Query(ctx, `SELECT d.subscriber, d.task_id, d.status, d.dead_at, coalesce(t.status, ''), coalesce(t.attempt_count, 0)
		FROM message_deliveries d LEFT JOIN tasks t ON t.task_id = d.task_id
		WHERE d.tenant = $1 AND d.message_id = $2 ORDER BY d.subscriber`, tenant, id)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.Delivery, error) {
		var d host.Delivery
		var status, dead, taskStatus string
		var attempts int
		if err := r.Scan(&d.Subscriber, &d.TaskID, &status, &dead, &taskStatus, &attempts); err != nil {
			return d, err
		}
		d.Status, d.TaskStatus, d.RetryCount = host.DeliveryStatus(status), host.TaskStatus(taskStatus), max(attempts-1, 0)
		if dead != "" {
			t := parseTS(dead)
			d.DeadAt = &t
		}
		return d, nil
	})
	if out == nil && err == nil {
		out = []host.Delivery{}
	}
	return out, err
}

// Message implements host.Messages.
func (s *Store) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	m, err := loadMessage(ctx, s.pool, s.pool, storecore.TenantOr(tenant), id)
	if err != nil {
		return nil, host.Wrap("message", id, err)
	}
	return m, nil
}

// ListMessages implements host.Messages.
func (s *Store) ListMessages(ctx context.Context, q host.MessageQuery) (*host.MessagePage, error) {
	const op = "list messages"
	limit := q.Limit
	switch {
	case limit == 0:
		limit = host.DefaultMessageLimit
	case limit < 0 || limit > host.MaxMessageLimit:
		return nil, host.Invalid(op, "limit", "must be between 1 and %d", host.MaxMessageLimit)
	}
	var a args
	where := `tenant = ` + a.add(storecore.TenantOr(q.Tenant)) + ` AND event_seq > ` + a.add(q.After)
	if q.Topic != "" {
		if err := abi.CheckTopicPattern(q.Topic); err != nil {
			return nil, host.Invalid(op, "topic", "%v", err)
		}
		switch all, lo, hi, exact := storecore.TopicBounds(q.Topic); {
		case exact != "":
			where += ` AND topic = ` + a.add(exact)
		case !all:
			where += ` AND topic >= ` + a.add(lo) + ` AND topic < ` + a.add(hi)
		}
	}
	if q.From != "" {
		where += ` AND sender = ` + a.add(q.From)
	}
	if q.ReplyTo != "" {
		where += ` AND reply_to = ` + a.add(q.ReplyTo)
	}
	if q.Dead {
		where += ` AND EXISTS (SELECT 1 FROM message_deliveries d WHERE d.tenant = messages.tenant AND d.message_id = messages.message_id AND d.status = 'dead')`
	}
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE `+where+` ORDER BY event_seq LIMIT `+a.add(limit+1), a...)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.MessageRecord, error) {
		m, err := storecore.ScanMessage(r)
		if err != nil {
			return host.MessageRecord{}, err
		}
		return *m, nil
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	page := &host.MessagePage{Messages: append([]host.MessageRecord{}, msgs...)}
	if len(page.Messages) > limit {
		page.Messages = page.Messages[:limit]
		page.Next = page.Messages[limit-1].Seq
	}
	for i := range page.Messages {
		m := &page.Messages[i]
		if m.Deliveries, err = loadDeliveries(ctx, s.pool, m.Tenant, m.MessageID); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	return page, nil
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
		if _, err := x.Exec(ctx, `DELETE FROM message_subscriptions WHERE pack = $1`, pack); err != nil {
			return err
		}
		for _, sub := range subs {
			topics, err := json.Marshal(sub.Topics)
			if err != nil {
				return err
			}
			if _, err := x.Exec(ctx, `INSERT INTO message_subscriptions (pack, node, task_type, topics) VALUES ($1, $2, $3, $4)`,
				pack, sub.Node, sub.TaskType, string(topics)); err != nil {
				return err
			}
		}
		return nil
	})
	return host.Wrap(op, pack, err)
}

// Subscriptions implements host.Messages.
func (s *Store) Subscriptions(ctx context.Context) ([]host.Subscription, error) {
	out, err := subscriptions(ctx, s.pool)
	if err != nil {
		return nil, host.Wrap("subscriptions", "", err)
	}
	if out == nil {
		out = []host.Subscription{}
	}
	return out, nil
}

// expireBatch bounds the deliveries one ExpireMessages write dead-letters.
const expireBatch = 500

// expiring selects the queued deliveries whose message expired by $1 and
// whose task has not started.
const expiring = ` FROM message_deliveries d JOIN tasks t ON t.task_id = d.task_id
	WHERE d.status = 'queued' AND d.expires_at != '' AND d.expires_at <= $1 AND t.status IN ('pending', 'retryable_failure')`

// deadLetter is a delivery ExpireMessages dead-letters.
type deadLetter struct{ tenant, id, sub, task, expires, status string }

// ExpireMessages implements host.Messages. The subscriber's task fails
// permanently (it never ran, or only failed retryably) with the reason in
// last_error, so it is never claimed. Several nodes may expire at once:
// each locks the deliveries and tasks it dead-letters (FOR UPDATE SKIP
// LOCKED: a task a node is claiming meanwhile is left to it).
func (s *Store) ExpireMessages(ctx context.Context, now time.Time) (int, error) {
	const op = "expire messages"
	if now.IsZero() {
		now = s.now()
	}
	// A read first, so that a check with nothing to expire costs no write.
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1`+expiring+` LIMIT 1`, ts(now)).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	n := 0
	err = s.write(ctx, func(x *tx) error {
		n = 0
		rows, err := x.Query(ctx, `SELECT d.tenant, d.message_id, d.subscriber, d.task_id, d.expires_at, t.status`+expiring+`
			LIMIT $2 FOR UPDATE OF d, t SKIP LOCKED`, ts(now), expireBatch)
		if err != nil {
			return err
		}
		var d deadLetter
		all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (deadLetter, error) {
			return d, r.Scan(&d.tenant, &d.id, &d.sub, &d.task, &d.expires, &d.status)
		})
		if err != nil {
			return err
		}
		for _, d := range all {
			if err := x.deadLetter(ctx, d, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	return n, nil
}

// deadLetter fails d's task for good and marks d dead, with their events.
func (x *tx) deadLetter(ctx context.Context, d deadLetter, now time.Time) error {
	reason := fmt.Sprintf("dead-lettered: message %s expired at %s before delivery", d.id, d.expires)
	if _, err := x.Exec(ctx, `UPDATE tasks SET status = 'permanent_failure', last_error = $1, finished_at = $2, updated_at = $2 WHERE task_id = $3`,
		reason, ts(now), d.task); err != nil {
		return err
	}
	if _, err := x.event(host.EventTaskFinished, d.task, "", map[string]any{"status": host.TaskPermanentFailure, "from": d.status, "reason": reason}); err != nil {
		return err
	}
	if _, err := x.Exec(ctx, `UPDATE message_deliveries SET status = 'dead', dead_at = $1 WHERE tenant = $2 AND message_id = $3 AND subscriber = $4`,
		ts(now), d.tenant, d.id, d.sub); err != nil {
		return err
	}
	_, err := x.event(host.EventMessageDeadLettered, d.task, "", map[string]any{
		"message_id": d.id, "subscriber": d.sub, "expired_at": d.expires, "tenant": d.tenant})
	return err
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

// findUnchainedMessage reports the first message no message_accepted
// event chains (inserted behind the chain's back).
func findUnchainedMessage(ctx context.Context, q pgx.Tx) (*host.ChainBreak, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT m.message_id FROM messages m
		LEFT JOIN runtime_events e ON e.seq = m.event_seq AND e.type = 'message_accepted'
		WHERE e.seq IS NULL OR (e.data::jsonb ->> 'message_id') IS DISTINCT FROM m.message_id
			OR (e.data::jsonb ->> 'tenant') IS DISTINCT FROM m.tenant LIMIT 1`).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return storecore.UnchainedMessage(id), nil
}
