package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

const messageColumns = `seq, tenant, message_id, format, document, model, hash, sender, recipient, topic, kind, reply_to,
	priority, expires_at, prev_hash, signed_by, origin, accepted_at, event_seq`

// PublishMessage implements host.Messages.
func (s *Store) PublishMessage(ctx context.Context, in *host.MessageInput) (*host.MessageReceipt, error) {
	const op = "publish message"
	if err := storecore.CheckMessageInput(op, in); err != nil {
		return nil, err
	}
	var out *host.MessageReceipt
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = s.applyMessage(tx, in, "", "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, in.MessageID, err)
	}
	return out, nil
}

// applyMessage accepts one message in tx (see host.Messages.PublishMessage).
// taskID and attemptID, if any, name the attempt that published it.
func (s *Store) applyMessage(tx *wtx, in *host.MessageInput, taskID, attemptID string, now time.Time) (*host.MessageReceipt, error) {
	const op = "publish message"
	tenant := storecore.TenantOr(in.Tenant)
	var seq int64
	var hash string
	err := tx.QueryRow(`SELECT seq, hash FROM messages WHERE tenant = ? AND message_id = ?`, tenant, in.MessageID).Scan(&seq, &hash)
	switch {
	case err == nil && hash != in.Hash:
		return nil, storecore.MessageConflict(in, hash)
	case err == nil:
		if _, err := s.event(tx, host.EventMessageDuplicate, taskID, attemptID, storecore.DuplicateData(in, tenant, hash)); err != nil {
			return nil, err
		}
		rec, err := s.loadMessage(txq{tx}, tenant, in.MessageID)
		return &host.MessageReceipt{Message: rec, Duplicate: true}, err
	case !errors.Is(err, sql.ErrNoRows):
		return nil, err
	}
	if err := s.advanceChain(tx, tenant, in); err != nil {
		return nil, err
	}
	subs, err := s.matchingSubscriptions(tx, in.Topic)
	if err != nil {
		return nil, err
	}
	e, err := s.eventData(tx, host.EventMessageAccepted, taskID, attemptID, acceptedData(in, tenant, len(subs)))
	if err != nil {
		return nil, err
	}
	expires := ""
	if !in.ExpiresAt.IsZero() {
		expires = ts(in.ExpiresAt)
	}
	if _, err := tx.Exec(`INSERT INTO messages (`+messageColumns+`) VALUES (NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, in.MessageID, in.Format, string(in.Document), string(in.Model), in.Hash, in.Sender, in.To, in.Topic, in.Kind,
		in.ReplyTo, in.Priority, expires, in.PrevHash, in.SignedBy, in.Origin, ts(now), e.Seq); err != nil {
		return nil, err
	}
	rec := storecore.AcceptedRecord(in, tenant, now)
	rec.EventSeq = e.Seq
	if err := tx.QueryRow(`SELECT last_insert_rowid()`).Scan(&rec.Seq); err != nil {
		return nil, err
	}
	for _, sub := range subs {
		task, err := s.deliver(tx, in, tenant, sub, expires, attemptID, now)
		if err != nil {
			return nil, err
		}
		rec.Deliveries = append(rec.Deliveries, host.Delivery{Subscriber: sub.Node, TaskID: task.TaskID, Status: host.DeliveryQueued, TaskStatus: task.Status})
	}
	return &host.MessageReceipt{Message: rec}, nil
}

// acceptedData is storecore.AcceptedData, appended in the keys' sorted
// order: the same bytes (TestAcceptedDataMatchesStorecore) without
// marshalling a map inside the writer.
func acceptedData(in *host.MessageInput, tenant string, deliveries int) *evData {
	d := &evData{}
	if in.By != "" {
		d.str("by", in.By)
	}
	if in.Log.Confidence != nil {
		d.value("confidence", *in.Log.Confidence)
	}
	d.int("deliveries", int64(deliveries)).str("direction", in.Log.Direction).int("evidence_count", int64(in.Log.EvidenceCount)).
		str("format", in.Format).str("hash", in.Hash).int("latency_ms", in.Log.LatencyMs).str("message_id", in.MessageID).
		str("model_hash", host.ContentHash(in.Model)).str("origin", in.Origin)
	optional := func(k, v string) {
		if v != "" {
			d.str(k, v)
		}
	}
	optional("prev_hash", in.PrevHash)
	optional("reply_to", in.ReplyTo)
	d.str("sender", in.Sender)
	optional("signed_by", in.SignedBy)
	d.str("status", in.Log.Status).str("tenant", tenant)
	optional("to", in.To)
	d.str("topic", in.Topic)
	return d
}

// advanceChain checks in against its sender's chain and makes it the
// sender's head. A message with a prev_truth_state must name the hash of
// the sender's previous accepted message (the first one packrun sees
// starts the chain); once a sender has sent one, every later message must
// carry one.
func (s *Store) advanceChain(tx *wtx, tenant string, in *host.MessageInput) error {
	const op = "publish message"
	var head, headID string
	var chained bool
	err := tx.QueryRow(`SELECT hash, message_id, chained FROM message_chains WHERE tenant = ? AND sender = ?`, tenant, in.Sender).Scan(&head, &headID, &chained)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	if err := storecore.CheckChainHead(in, found, head, headID, chained); err != nil {
		return err
	}
	_, err = tx.Exec(`INSERT INTO message_chains (tenant, sender, hash, message_id, chained) VALUES (?1, ?2, ?3, ?4, ?5)
		ON CONFLICT (tenant, sender) DO UPDATE SET hash = ?3, message_id = ?4, chained = chained OR ?5`,
		tenant, in.Sender, in.Hash, in.MessageID, in.PrevHash != "")
	return err
}

// subsCache keeps the subscription table, read once per change: every
// message looks it up. It is coherent through the routes generation, which
// SetPackSubscriptions touches (see genCache).
type subsCache = genCache[struct{}, []host.Subscription]

func newSubsCache(g gen) *subsCache {
	return newGenCache(g, 16<<20, func(_ struct{}, subs []host.Subscription) int { return len(subs) })
}

// matchingSubscriptions returns the subscriptions one of whose patterns
// matches topic, by pack and node.
func (s *Store) matchingSubscriptions(tx *wtx, topic string) ([]host.Subscription, error) {
	now := time.Now()
	all, ok, g := s.subs.lookup(struct{}{}, now)
	if !ok {
		rows, err := tx.Query(`SELECT pack, node, task_type, topics FROM message_subscriptions ORDER BY pack, node`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		for rows.Next() {
			sub, err := scanSubscription(rows)
			if err != nil {
				return nil, err
			}
			all = append(all, *sub)
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
		s.subs.store(struct{}{}, all, g, now)
	}
	var out []host.Subscription
	for _, sub := range all {
		if abi.MatchAnyTopic(sub.Topics, topic) {
			out = append(out, sub)
		}
	}
	return out, nil
}

func scanSubscription(row interface{ Scan(...any) error }) (*host.Subscription, error) {
	var sub host.Subscription
	var topics string
	if err := row.Scan(&sub.Pack, &sub.Node, &sub.TaskType, &topics); err != nil {
		return nil, err
	}
	return &sub, json.Unmarshal([]byte(topics), &sub.Topics)
}

// deliver creates sub's task for the message and its delivery row.
func (s *Store) deliver(tx *wtx, in *host.MessageInput, tenant string, sub host.Subscription, expires, attemptID string, now time.Time) (*host.TaskRecord, error) {
	intent, err := storecore.DeliveryIntent(in, sub)
	if err != nil {
		return nil, err
	}
	t, err := storecore.NewTask("deliver message", intent, 0, now)
	if err != nil {
		return nil, err
	}
	t.Tenant = tenant
	if err := s.insertTask(tx, t, attemptID); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(`INSERT INTO message_deliveries (tenant, message_id, subscriber, task_id, status, expires_at) VALUES (?, ?, ?, ?, 'queued', ?)`,
		tenant, in.MessageID, sub.Node, t.TaskID, expires); err != nil {
		return nil, err
	}
	_, err = s.eventData(tx, host.EventMessageDelivered, t.TaskID, attemptID, (&evData{}).str("message_id", in.MessageID).
		str("pack", sub.Pack).int("priority", int64(t.Priority)).str("subscriber", sub.Node).str("topic", in.Topic))
	return t, err
}

// applyPublished accepts the messages an attempt published, when its task
// completes: one the bus refuses (out of its sender's chain, an id reused
// with other content, invalid) is left out with a message_refused event.
func (s *Store) applyPublished(tx *wtx, msgs []host.MessageInput, tenant, taskID, attemptID string, now time.Time) error {
	for i := range msgs {
		in := &msgs[i]
		in.Tenant = tenant
		err := storecore.CheckMessageInput("publish message", in)
		if err == nil {
			if _, err = s.applyMessage(tx, in, taskID, attemptID, now); err == nil {
				continue
			}
			if !errors.Is(err, host.ErrValidation) && !errors.Is(err, host.ErrConflict) {
				return err
			}
		}
		if _, err := s.event(tx, host.EventMessageRefused, taskID, attemptID, map[string]any{
			"message_id": in.MessageID, "topic": in.Topic, "origin": in.Origin, "detail": err.Error()}); err != nil {
			return err
		}
	}
	return nil
}

// readQueryer reads in a write transaction (txq) or on the pool (*sql.DB).
type readQueryer interface {
	queryer
	rowsQueryer
}

func (q txq) QueryContext(_ context.Context, query string, args ...any) (*sql.Rows, error) {
	return q.tx.Query(query, args...)
}

// loadMessage reads one message with its deliveries.
func (s *Store) loadMessage(q readQueryer, tenant, id string) (*host.MessageRecord, error) {
	ctx := context.Background()
	m, err := storecore.ScanMessage(q.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE tenant = ? AND message_id = ?`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf("message", id, host.ErrNotFound, "no message %s", id)
	}
	if err != nil {
		return nil, err
	}
	m.Deliveries, err = loadDeliveries(ctx, q, tenant, id)
	return m, err
}

func loadDeliveries(ctx context.Context, q rowsQueryer, tenant, id string) ([]host.Delivery, error) {
	rows, err := q.QueryContext(ctx, `SELECT d.subscriber, d.task_id, d.status, d.dead_at, COALESCE(t.status, ''), COALESCE(t.attempt_count, 0)
		FROM message_deliveries d LEFT JOIN tasks t ON t.task_id = d.task_id
		WHERE d.tenant = ? AND d.message_id = ? ORDER BY d.subscriber`, tenant, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []host.Delivery{}
	for rows.Next() {
		var d host.Delivery
		var status, dead, taskStatus string
		var attempts int
		if err := rows.Scan(&d.Subscriber, &d.TaskID, &status, &dead, &taskStatus, &attempts); err != nil {
			return nil, err
		}
		d.Status, d.TaskStatus, d.RetryCount = host.DeliveryStatus(status), host.TaskStatus(taskStatus), max(attempts-1, 0)
		if dead != "" {
			t := parseTS(dead)
			d.DeadAt = &t
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// Message implements host.Messages.
func (s *Store) Message(ctx context.Context, tenant, id string) (*host.MessageRecord, error) {
	m, err := s.loadMessage(s.db, storecore.TenantOr(tenant), id)
	if err != nil {
		return nil, host.Wrap("message", id, err)
	}
	return m, nil
}

// topicFilter turns a topic pattern into a WHERE clause (see
// storecore.TopicBounds).
func topicFilter(pattern string) (string, []any) {
	switch all, lo, hi, exact := storecore.TopicBounds(pattern); {
	case all:
		return "", nil
	case exact == "":
		return ` AND topic >= ? AND topic < ?`, []any{lo, hi}
	default:
		return ` AND topic = ?`, []any{exact}
	}
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
	where, args := `tenant = ? AND seq > ?`, []any{storecore.TenantOr(q.Tenant), q.After}
	if q.Topic != "" {
		if err := abi.CheckTopicPattern(q.Topic); err != nil {
			return nil, host.Invalid(op, "topic", "%v", err)
		}
		w, a := topicFilter(q.Topic)
		where, args = where+w, append(args, a...)
	}
	if q.From != "" {
		where, args = where+` AND sender = ?`, append(args, q.From)
	}
	if q.ReplyTo != "" {
		where, args = where+` AND reply_to = ?`, append(args, q.ReplyTo)
	}
	if q.Dead {
		where += ` AND EXISTS (SELECT 1 FROM message_deliveries d WHERE d.tenant = messages.tenant AND d.message_id = messages.message_id AND d.status = 'dead')`
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE `+where+` ORDER BY seq LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	page := &host.MessagePage{Messages: []host.MessageRecord{}}
	for rows.Next() {
		m, err := storecore.ScanMessage(rows)
		if err != nil {
			rows.Close()
			return nil, host.Wrap(op, "", err)
		}
		page.Messages = append(page.Messages, *m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, host.Wrap(op, "", err)
	}
	if len(page.Messages) > limit {
		page.Messages = page.Messages[:limit]
		page.Next = page.Messages[limit-1].Seq
	}
	for i := range page.Messages {
		m := &page.Messages[i]
		if m.Deliveries, err = loadDeliveries(ctx, s.db, m.Tenant, m.MessageID); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	return page, nil
}

// SetPackSubscriptions implements host.Messages.
func (s *Store) SetPackSubscriptions(ctx context.Context, pack string, subs []host.Subscription) error {
	const op = "set subscriptions"
	if err := storecore.CheckSubscriptions(op, pack, subs); err != nil {
		return err
	}
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes)
		if _, err := tx.Exec(`DELETE FROM message_subscriptions WHERE pack = ?`, pack); err != nil {
			return err
		}
		for _, sub := range subs {
			topics, err := json.Marshal(sub.Topics)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(`INSERT INTO message_subscriptions (pack, node, task_type, topics) VALUES (?, ?, ?, ?)`,
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
	rows, err := s.db.QueryContext(ctx, `SELECT pack, node, task_type, topics FROM message_subscriptions ORDER BY pack, node`)
	if err != nil {
		return nil, host.Wrap("subscriptions", "", err)
	}
	defer rows.Close()
	out := []host.Subscription{}
	for rows.Next() {
		sub, err := scanSubscription(rows)
		if err != nil {
			return nil, host.Wrap("subscriptions", "", err)
		}
		out = append(out, *sub)
	}
	return out, rows.Err()
}

// expireBatch bounds the deliveries one ExpireMessages write dead-letters.
const expireBatch = 500

// ExpireMessages implements host.Messages. The subscriber's task fails
// permanently (it never ran, or only failed retryably) with the reason in
// last_error, so it is never claimed.
func (s *Store) ExpireMessages(ctx context.Context, now time.Time) (int, error) {
	const op = "expire messages"
	if now.IsZero() {
		now = s.now()
	}
	// A read first, so that a check with nothing to expire costs no write.
	var one int
	err := s.queryRow(ctx, `SELECT 1 FROM message_deliveries d JOIN tasks t ON t.task_id = d.task_id
		WHERE d.status = 'queued' AND d.expires_at != '' AND d.expires_at <= ? AND t.status IN ('pending', 'retryable_failure') LIMIT 1`, ts(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	n := 0
	err = s.w.do(ctx, func(tx *wtx) error {
		n = 0
		rows, err := tx.Query(`SELECT d.tenant, d.message_id, d.subscriber, d.task_id, d.expires_at, t.status
			FROM message_deliveries d JOIN tasks t ON t.task_id = d.task_id
			WHERE d.status = 'queued' AND d.expires_at != '' AND d.expires_at <= ? AND t.status IN ('pending', 'retryable_failure')
			LIMIT ?`, ts(now), expireBatch)
		if err != nil {
			return err
		}
		type dead struct{ tenant, id, sub, task, expires, status string }
		var all []dead
		for rows.Next() {
			var d dead
			if err := rows.Scan(&d.tenant, &d.id, &d.sub, &d.task, &d.expires, &d.status); err != nil {
				rows.Close()
				return err
			}
			all = append(all, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range all {
			reason := fmt.Sprintf("dead-lettered: message %s expired at %s before delivery", d.id, d.expires)
			if _, err := tx.Exec(`UPDATE tasks SET status = 'permanent_failure', last_error = ?1, finished_at = ?2, updated_at = ?2 WHERE task_id = ?3`,
				reason, ts(now), d.task); err != nil {
				return err
			}
			if _, err := s.event(tx, host.EventTaskFinished, d.task, "", map[string]any{"status": host.TaskPermanentFailure, "from": d.status, "reason": reason}); err != nil {
				return err
			}
			if _, err := tx.Exec(`UPDATE message_deliveries SET status = 'dead', dead_at = ? WHERE tenant = ? AND message_id = ? AND subscriber = ?`,
				ts(now), d.tenant, d.id, d.sub); err != nil {
				return err
			}
			if _, err := s.event(tx, host.EventMessageDeadLettered, d.task, "", map[string]any{
				"message_id": d.id, "subscriber": d.sub, "expired_at": d.expires, "tenant": d.tenant}); err != nil {
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

// checkMessage checks the message a message_accepted event chained: it is
// still stored, points back at the event, and its document still has the
// hash the event recorded (its canonical form re-hashed) and its model
// the model hash.
func (s *Store) checkMessage(ctx context.Context, e *host.Event) (*host.ChainBreak, error) {
	var d storecore.AcceptedRef
	json.Unmarshal(e.Data, &d)
	m, err := storecore.ScanMessage(s.db.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE tenant = ? AND message_id = ?`, d.Tenant, d.MessageID))
	if errors.Is(err, sql.ErrNoRows) {
		return storecore.CheckAcceptedMessage(e, nil), nil
	}
	if err != nil {
		return nil, err
	}
	return storecore.CheckAcceptedMessage(e, m), nil
}

// findUnchainedMessage reports the first message no message_accepted
// event chains (inserted behind the chain's back).
func (s *Store) findUnchainedMessage(ctx context.Context) (*host.ChainBreak, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT m.message_id FROM messages m
		LEFT JOIN runtime_events e ON e.seq = m.event_seq AND e.type = 'message_accepted'
		WHERE e.seq IS NULL OR json_extract(e.data, '$.message_id') IS NOT m.message_id
			OR json_extract(e.data, '$.tenant') IS NOT m.tenant LIMIT 1`).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return storecore.UnchainedMessage(id), nil
}
