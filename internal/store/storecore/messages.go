package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// The agent messages' rules (host.Messages: the senders' chains, dedupe,
// fan-out to subscribers, dead letters) written once against MessageTx.
// What differs is how a message gets its seq: SQLite's is its row's
// (assigned at insert, under its single writer), PostgreSQL's its
// message_accepted event's, assigned when the transaction links its
// chain entries (see the postgres driver's messageColumns).

// MessageTx is a Tx that stores accepted messages.
type MessageTx interface {
	Tx
	// MessageSubscriptions reads every subscription, by pack and node.
	MessageSubscriptions(ctx context.Context) ([]host.Subscription, error)
	// ClaimMessage claims rec's id for the message in: false if another
	// writer's message holds it (PostgreSQL inserts rec's row here;
	// SQLite, whose single writer found the id free, in AcceptMessage).
	ClaimMessage(ctx context.Context, in *host.MessageInput, rec *host.MessageRecord, expires string) (bool, error)
	// AcceptMessage appends the message_accepted event (AcceptedData) of
	// the claimed rec and gives rec its Seq and EventSeq (on PostgreSQL
	// when the transaction links its entries).
	AcceptMessage(ctx context.Context, in *host.MessageInput, rec *host.MessageRecord, expires string, deliveries int, taskID, attemptID string) error
	// MessageSeq is the column that is a message's seq.
	MessageSeq() string
	// InsertTaskBy inserts a task created by attemptID ("" if none).
	InsertTaskBy(ctx context.Context, t *host.TaskRecord, attemptID string) error
}

// MessageColumns are a message's columns after its seq, the column each
// driver names (ScanMessage reads them).
const MessageColumns = `tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
	priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq`

// ApplyMessage accepts one checked message (see
// host.Messages.PublishMessage). taskID and attemptID, if any, name the
// attempt that published it.
//
// Across writers: the sender's chain head row is locked first (created
// empty if the sender has none: an empty hash), so that one sender's
// messages are accepted one at a time, each checked against the head the
// previous one left; the message id is then looked up, and claimed
// (ClaimMessage) in case another writer accepted that id meanwhile (the
// same id from another sender, whose chain row is another). Nothing but
// an empty head row is written before the message is known to be
// accepted.
func ApplyMessage(ctx context.Context, tx MessageTx, in *host.MessageInput, taskID, attemptID string, now time.Time) (*host.MessageReceipt, error) {
	tenant := TenantOr(in.Tenant)
	if _, err := tx.Exec(ctx, `INSERT INTO message_chains (tenant, sender, hash, message_id, chained) VALUES ($1, $2, '', '', $3)
		ON CONFLICT (tenant, sender) DO NOTHING`, tenant, in.Sender, false); err != nil {
		return nil, err
	}
	var head, headID string
	var chained bool
	if err := tx.QueryRow(ctx, `SELECT hash, message_id, chained FROM message_chains WHERE tenant = $1 AND sender = $2`+tx.Dialect().LockRows,
		tenant, in.Sender).Scan(&head, &headID, &chained); err != nil {
		return nil, err
	}
	if r, err := duplicateMessage(ctx, tx, in, tenant, taskID, attemptID); r != nil || err != nil {
		return r, err
	}
	if err := CheckChainHead(in, head != "", head, headID, chained); err != nil {
		return nil, err
	}
	rec := AcceptedRecord(in, tenant, now)
	expires := ""
	if rec.ExpiresAt != nil {
		expires = host.FormatTime(*rec.ExpiresAt)
	}
	claimed, err := tx.ClaimMessage(ctx, in, rec, expires)
	if err != nil {
		return nil, err
	}
	if !claimed {
		// Accepted meanwhile by another writer, from another sender.
		r, err := duplicateMessage(ctx, tx, in, tenant, taskID, attemptID)
		if r == nil && err == nil {
			err = fmt.Errorf("message %s: its id is taken but no message has it", in.MessageID)
		}
		return r, err
	}
	if _, err := tx.Exec(ctx, `UPDATE message_chains SET hash = $3, message_id = $4, chained = chained OR $5 WHERE tenant = $1 AND sender = $2`,
		tenant, in.Sender, in.Hash, in.MessageID, in.PrevHash != ""); err != nil {
		return nil, err
	}
	subs, err := matchingSubscriptions(ctx, tx, in.Topic)
	if err != nil {
		return nil, err
	}
	if err := tx.AcceptMessage(ctx, in, rec, expires, len(subs), taskID, attemptID); err != nil {
		return nil, err
	}
	for _, sub := range subs {
		task, err := deliver(ctx, tx, in, tenant, sub, expires, attemptID, now)
		if err != nil {
			return nil, err
		}
		rec.Deliveries = append(rec.Deliveries, host.Delivery{Subscriber: sub.Node, TaskID: task.TaskID, Status: host.DeliveryQueued, TaskStatus: task.Status})
	}
	return &host.MessageReceipt{Message: rec}, nil
}

// duplicateMessage looks up the tenant's message of in's id: if there is
// one, in is its duplicate (event message_duplicate, and its receipt) or,
// with another hash, a conflict; if not, both results are nil. (On
// PostgreSQL a message accepted earlier in the same transaction has no
// seq yet: 0.)
func duplicateMessage(ctx context.Context, tx MessageTx, in *host.MessageInput, tenant, taskID, attemptID string) (*host.MessageReceipt, error) {
	var hash string
	err := tx.QueryRow(ctx, `SELECT hash FROM messages WHERE tenant = $1 AND message_id = $2`, tenant, in.MessageID).Scan(&hash)
	switch {
	case errors.Is(err, ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, err
	case hash != in.Hash:
		return nil, MessageConflict(in, hash)
	}
	if err := tx.Event(host.EventMessageDuplicate, taskID, attemptID, DuplicateData(in, tenant, hash)); err != nil {
		return nil, err
	}
	rec, err := LoadMessage(ctx, tx, tx.MessageSeq(), tenant, in.MessageID)
	return &host.MessageReceipt{Message: rec, Duplicate: true}, err
}

// matchingSubscriptions returns the subscriptions one of whose patterns
// matches topic, by pack and node.
func matchingSubscriptions(ctx context.Context, tx MessageTx, topic string) ([]host.Subscription, error) {
	all, err := tx.MessageSubscriptions(ctx)
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

// deliver creates sub's task for the message and its delivery row.
func deliver(ctx context.Context, tx MessageTx, in *host.MessageInput, tenant string, sub host.Subscription, expires, attemptID string, now time.Time) (*host.TaskRecord, error) {
	intent, err := DeliveryIntent(in, sub)
	if err != nil {
		return nil, err
	}
	t, err := NewTask("deliver message", intent, 0, now)
	if err != nil {
		return nil, err
	}
	t.Tenant = tenant
	if err := tx.InsertTaskBy(ctx, t, attemptID); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO message_deliveries (tenant, message_id, subscriber, task_id, status, expires_at) VALUES ($1, $2, $3, $4, 'queued', $5)`,
		tenant, in.MessageID, sub.Node, t.TaskID, expires); err != nil {
		return nil, err
	}
	return t, tx.Event(host.EventMessageDelivered, t.TaskID, attemptID, map[string]any{
		"message_id": in.MessageID, "subscriber": sub.Node, "pack": sub.Pack, "topic": in.Topic, "priority": t.Priority})
}

// ApplyPublished accepts the messages an attempt published, when its task
// completes: one the bus refuses (out of its sender's chain, an id reused
// with other content, invalid) is left out with a message_refused event.
// A refused message leaves nothing behind but, for a sender never seen
// before, its empty chain head row (see ApplyMessage).
func ApplyPublished(ctx context.Context, tx MessageTx, msgs []host.MessageInput, tenant, taskID, attemptID string, now time.Time) error {
	for i := range msgs {
		in := &msgs[i]
		in.Tenant = tenant
		err := CheckMessageInput("publish message", in)
		if err == nil {
			if _, err = ApplyMessage(ctx, tx, in, taskID, attemptID, now); err == nil {
				continue
			}
			if !errors.Is(err, host.ErrValidation) && !errors.Is(err, host.ErrConflict) {
				return err
			}
		}
		if err := tx.Event(host.EventMessageRefused, taskID, attemptID, map[string]any{
			"message_id": in.MessageID, "topic": in.Topic, "origin": in.Origin, "detail": err.Error()}); err != nil {
			return err
		}
	}
	return nil
}

// LoadMessage reads one message with its deliveries; seq is the column
// that is its seq.
func LoadMessage(ctx context.Context, q Querier, seq, tenant, id string) (*host.MessageRecord, error) {
	m, err := ScanMessage(q.QueryRow(ctx, `SELECT `+seq+`, `+MessageColumns+` FROM messages WHERE tenant = $1 AND message_id = $2`, tenant, id))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf("message", id, host.ErrNotFound, "no message %s", id)
	}
	if err != nil {
		return nil, err
	}
	m.Deliveries, err = loadDeliveries(ctx, q, tenant, id)
	return m, err
}

func loadDeliveries(ctx context.Context, q Querier, tenant, id string) ([]host.Delivery, error) {
	rows, err := q.Query(ctx, `SELECT d.subscriber, d.task_id, d.status, d.dead_at, COALESCE(t.status, ''), COALESCE(t.attempt_count, 0)
		FROM message_deliveries d LEFT JOIN tasks t ON t.task_id = d.task_id
		WHERE d.tenant = $1 AND d.message_id = $2 ORDER BY d.subscriber`, tenant, id)
	if err != nil {
		return nil, err
	}
	out, err := CollectRows(rows, func(r Row) (host.Delivery, error) {
		var d host.Delivery
		var status, dead, taskStatus string
		var attempts int
		if err := r.Scan(&d.Subscriber, &d.TaskID, &status, &dead, &taskStatus, &attempts); err != nil {
			return d, err
		}
		d.Status, d.TaskStatus, d.RetryCount = host.DeliveryStatus(status), host.TaskStatus(taskStatus), max(attempts-1, 0)
		if dead != "" {
			t := ParseTime(dead)
			d.DeadAt = &t
		}
		return d, nil
	})
	if out == nil && err == nil {
		out = []host.Delivery{}
	}
	return out, err
}

// ListMessages lists a tenant's messages after a cursor (see
// host.Messages.ListMessages); seq is the column that is their seq.
func ListMessages(ctx context.Context, db Querier, seq string, q host.MessageQuery) (*host.MessagePage, error) {
	const op = "list messages"
	limit := q.Limit
	switch {
	case limit == 0:
		limit = host.DefaultMessageLimit
	case limit < 0 || limit > host.MaxMessageLimit:
		return nil, host.Invalid(op, "limit", "must be between 1 and %d", host.MaxMessageLimit)
	}
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := `tenant = ` + arg(TenantOr(q.Tenant)) + ` AND ` + seq + ` > ` + arg(q.After)
	if q.Topic != "" {
		if err := abi.CheckTopicPattern(q.Topic); err != nil {
			return nil, host.Invalid(op, "topic", "%v", err)
		}
		switch all, lo, hi, exact := TopicBounds(q.Topic); {
		case exact != "":
			where += ` AND topic = ` + arg(exact)
		case !all:
			where += ` AND topic >= ` + arg(lo) + ` AND topic < ` + arg(hi)
		}
	}
	if q.From != "" {
		where += ` AND sender = ` + arg(q.From)
	}
	if q.ReplyTo != "" {
		where += ` AND reply_to = ` + arg(q.ReplyTo)
	}
	if q.Dead {
		where += ` AND EXISTS (SELECT 1 FROM message_deliveries d WHERE d.tenant = messages.tenant AND d.message_id = messages.message_id AND d.status = 'dead')`
	}
	rows, err := db.Query(ctx, `SELECT `+seq+`, `+MessageColumns+` FROM messages WHERE `+where+` ORDER BY `+seq+` LIMIT `+arg(limit+1), args...)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	msgs, err := CollectRows(rows, func(r Row) (host.MessageRecord, error) {
		m, err := ScanMessage(r)
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
		if m.Deliveries, err = loadDeliveries(ctx, db, m.Tenant, m.MessageID); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	return page, nil
}

// ReplaceSubscriptions replaces a pack's subscriptions (checked by
// CheckSubscriptions).
func ReplaceSubscriptions(ctx context.Context, tx Tx, pack string, subs []host.Subscription) error {
	if _, err := tx.Exec(ctx, `DELETE FROM message_subscriptions WHERE pack = $1`, pack); err != nil {
		return err
	}
	for _, sub := range subs {
		topics, err := json.Marshal(sub.Topics)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO message_subscriptions (pack, node, task_type, topics) VALUES ($1, $2, $3, $4)`,
			pack, sub.Node, sub.TaskType, string(topics)); err != nil {
			return err
		}
	}
	return nil
}

// Subscriptions reads every subscription, by pack and node.
func Subscriptions(ctx context.Context, q Querier) ([]host.Subscription, error) {
	rows, err := q.Query(ctx, `SELECT pack, node, task_type, topics FROM message_subscriptions ORDER BY pack, node`)
	if err != nil {
		return nil, err
	}
	out, err := CollectRows(rows, func(r Row) (host.Subscription, error) {
		var sub host.Subscription
		var topics string
		if err := r.Scan(&sub.Pack, &sub.Node, &sub.TaskType, &topics); err != nil {
			return sub, err
		}
		return sub, json.Unmarshal([]byte(topics), &sub.Topics)
	})
	if out == nil && err == nil {
		out = []host.Subscription{}
	}
	return out, err
}

// ExpireBatch bounds the deliveries one ExpireMessages write dead-letters.
const ExpireBatch = 500

// expiring selects the queued deliveries whose message expired by $1 and
// whose task has not started.
const expiring = ` FROM message_deliveries d JOIN tasks t ON t.task_id = d.task_id
	WHERE d.status = 'queued' AND d.expires_at != '' AND d.expires_at <= $1 AND t.status IN ('pending', 'retryable_failure')`

// AnyExpiring reports whether ExpireMessages has something to do: a read,
// so that a check with nothing to expire costs no write.
func AnyExpiring(ctx context.Context, q Querier, now time.Time) (bool, error) {
	var one int
	err := q.QueryRow(ctx, `SELECT 1`+expiring+` LIMIT 1`, host.FormatTime(now)).Scan(&one)
	if errors.Is(err, ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// deadLetter is a delivery ExpireMessages dead-letters.
type deadLetter struct{ tenant, id, sub, task, expires, status string }

// ExpireMessages dead-letters up to ExpireBatch deliveries whose message
// expired by now: the subscriber's task fails permanently (it never ran,
// or only failed retryably) with the reason in last_error, so it is never
// claimed. Several writers may expire at once: each locks the deliveries
// and tasks it dead-letters (Dialect.SkipLocked: a task another writer is
// claiming meanwhile is left to it).
func ExpireMessages(ctx context.Context, tx Tx, now time.Time) (int, error) {
	at := host.FormatTime(now)
	rows, err := tx.Query(ctx, `SELECT d.tenant, d.message_id, d.subscriber, d.task_id, d.expires_at, t.status`+expiring+`
		LIMIT $2`+tx.Dialect().SkipLocked, at, ExpireBatch)
	if err != nil {
		return 0, err
	}
	all, err := CollectRows(rows, func(r Row) (d deadLetter, err error) {
		return d, r.Scan(&d.tenant, &d.id, &d.sub, &d.task, &d.expires, &d.status)
	})
	if err != nil {
		return 0, err
	}
	for _, d := range all {
		reason := fmt.Sprintf("dead-lettered: message %s expired at %s before delivery", d.id, d.expires)
		if _, err := tx.Exec(ctx, `UPDATE tasks SET status = 'permanent_failure', last_error = $1, finished_at = $2, updated_at = $2 WHERE task_id = $3`,
			reason, at, d.task); err != nil {
			return 0, err
		}
		if err := tx.Event(host.EventTaskFinished, d.task, "", map[string]any{"status": host.TaskPermanentFailure, "from": d.status, "reason": reason}); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE message_deliveries SET status = 'dead', dead_at = $1 WHERE tenant = $2 AND message_id = $3 AND subscriber = $4`,
			at, d.tenant, d.id, d.sub); err != nil {
			return 0, err
		}
		if err := tx.Event(host.EventMessageDeadLettered, d.task, "", map[string]any{
			"message_id": d.id, "subscriber": d.sub, "expired_at": d.expires, "tenant": d.tenant}); err != nil {
			return 0, err
		}
	}
	return len(all), nil
}
