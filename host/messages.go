package host

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Agent messages: the bus that carries the messages of the three message
// specs (BlackRoad envelope, AgentOS, AICO). The wire formats, their
// codecs and the signature check live in internal/message; the store sees a message already
// decoded, validated and (where it is signed) verified: a MessageInput.

// Message events. Each accepted message is one message_accepted event in
// the hash chain; its data carries the message's hash (re-checked by
// evidence verify against the stored message) and the AgentOS message schema's MessageLog
// fields (direction, status, latency_ms, evidence_count, confidence).
const (
	// EventMessageAccepted: a message was accepted (data.message_id,
	// hash, topic, sender, deliveries, and the MessageLog fields).
	EventMessageAccepted = "message_accepted"
	// EventMessageDuplicate: a message with an accepted message's id and
	// hash was sent again and created nothing (data.message_id).
	EventMessageDuplicate = "message_duplicate"
	// EventMessageDelivered: an accepted message created a subscriber's
	// task (the event's task_id; data.message_id, subscriber).
	EventMessageDelivered = "message_delivered"
	// EventMessageDeadLettered: a message's ttl ran out before a
	// subscriber's task started; the task fails for good
	// (permanent_failure, last_error says why) and the delivery joins the
	// dead-letter list (data.message_id, subscriber).
	EventMessageDeadLettered = "message_dead_lettered"
	// EventMessageRefused: a message an attempt published (message_publish
	// or its outcome's external_messages) could not be accepted when the
	// task completed (data.detail says why); nothing else was stored.
	EventMessageRefused = "message_refused"
)

// Message limits.
const (
	// MaxMessageBytes caps one message document (the codecs' limit).
	MaxMessageBytes = 256 << 10
	// MaxPublishedMessages caps the messages one attempt may publish
	// (message_publish calls and its outcome's external_messages).
	MaxPublishedMessages = 100
	// MaxSubscriptions caps the topic patterns one node subscribes to.
	MaxSubscriptions = 32
)

// Message priority (the BlackRoad envelope schema's 0–10, highest first) maps onto the queue
// (lowest number first): queue priority = 10 - message priority, so the
// default message priority 5 is the queue's default 5. Crisis topics
// (CrisisTopicPrefix) go ahead of everything, at CrisisQueuePriority.
const (
	CrisisTopicPrefix   = "crisis."
	CrisisQueuePriority = -1
)

// MessageQueuePriority is the queue priority of the tasks a message with
// topic and priority (0–10) creates.
func MessageQueuePriority(topic string, priority int) int {
	if strings.HasPrefix(topic, CrisisTopicPrefix) {
		return CrisisQueuePriority
	}
	return 10 - min(max(priority, 0), 10)
}

// MessageLog is the AgentOS message schema's MessageLog, as the runtime events carry it.
type MessageLog struct {
	Direction     string   `json:"direction"` // "received" (from outside) or "sent" (by a task)
	Status        string   `json:"status"`    // "success" or "error"
	LatencyMs     int64    `json:"latency_ms"`
	EvidenceCount int      `json:"evidence_count"`
	Confidence    *float64 `json:"confidence,omitempty"`
}

// MessageInput is one decoded, validated message the bus is asked to
// accept.
type MessageInput struct {
	Tenant string
	// Origin says who handed it over: "api", "task:<id>" (message_publish)
	// or "outbox:<task id>" (an outcome's external_messages).
	Origin string
	// By names the caller of an "api" message (its token id, or "none"
	// without authentication), recorded in its message_accepted or
	// message_duplicate event: that event is the call's audit record.
	By string
	// Format is the wire format it arrived in; Document the document as
	// accepted (compact JSON, signature included): the message's own
	// bytes, rendered back in its own format unchanged.
	Format   string
	Document json.RawMessage
	// Model is the normalised message (internal/message.Message as JSON),
	// what other formats are rendered from.
	Model json.RawMessage
	// Hash is the lowercase hex SHA-256 of the message's canonical form
	// (JCS without signature): what the sender's next prev_truth_state
	// names.
	Hash      string
	MessageID string
	// Sender is the chain's key: the sender identity the format names
	// (the BlackRoad envelope schema's agent://name, the AgentOS message schema's agentId, the AICO message formats' source).
	Sender  string
	To      string
	Topic   string
	Kind    string
	ReplyTo string
	// Priority is normalised to 0–10 (highest first).
	Priority int
	// ExpiresAt is when an undelivered message is dead-lettered (zero:
	// never): the message's time plus its ttl.
	ExpiresAt time.Time
	// PrevHash is the message's prev_truth_state ("" when its format
	// carries none).
	PrevHash string
	// SignedBy is the agent whose registered key verified the signature
	// ("" for an unsigned message).
	SignedBy string
	Log      MessageLog
}

// Subscription is one node's subscription: the task type its deliveries
// run as (SubscriberTaskType) and the topic patterns it declared.
type Subscription struct {
	Pack     string   `json:"pack"` // pack name
	Node     string   `json:"node"` // typeId
	TaskType string   `json:"task_type"`
	Topics   []string `json:"topics"`
}

// SubscriberTaskType is the task type of a subscribing node's deliveries.
func SubscriberTaskType(typeID string) string { return "message:" + typeID }

// DeliveryStatus is where one delivery stands.
type DeliveryStatus string

const (
	DeliveryQueued DeliveryStatus = "queued" // its task exists (see the task's status)
	DeliveryDead   DeliveryStatus = "dead"   // ttl ran out before its task started
)

// Delivery is one subscriber's copy of a message: the task it created.
type Delivery struct {
	Subscriber string         `json:"subscriber"` // the node's typeId
	TaskID     string         `json:"task_id"`
	Status     DeliveryStatus `json:"status"`
	// TaskStatus is the task's status, RetryCount its redeliveries (the
	// attempts after the first: the AgentOS message schema's retryCount).
	TaskStatus TaskStatus `json:"task_status,omitempty"`
	RetryCount int        `json:"retry_count"`
	DeadAt     *time.Time `json:"dead_at,omitempty"`
}

// MessageRecord is an accepted message as stored.
type MessageRecord struct {
	Seq        int64           `json:"seq"` // the list cursor
	Tenant     string          `json:"tenant"`
	MessageID  string          `json:"message_id"`
	Format     string          `json:"format"`
	Document   json.RawMessage `json:"document,omitempty"`
	Model      json.RawMessage `json:"model,omitempty"`
	Hash       string          `json:"hash"`
	Sender     string          `json:"sender"`
	To         string          `json:"to,omitempty"`
	Topic      string          `json:"topic"`
	Kind       string          `json:"kind"`
	ReplyTo    string          `json:"reply_to,omitempty"`
	Priority   int             `json:"priority"`
	ExpiresAt  *time.Time      `json:"expires_at,omitempty"`
	PrevHash   string          `json:"prev_hash,omitempty"`
	SignedBy   string          `json:"signed_by,omitempty"`
	Origin     string          `json:"origin"`
	AcceptedAt time.Time       `json:"accepted_at"`
	// EventSeq is the message_accepted event that chains it.
	EventSeq   int64      `json:"event_seq"`
	Deliveries []Delivery `json:"deliveries"`
}

// MessageReceipt is what PublishMessage did.
type MessageReceipt struct {
	Message *MessageRecord `json:"message"`
	// Duplicate: the message had been accepted before; nothing was
	// created now and Message is the earlier record.
	Duplicate bool `json:"duplicate"`
}

// MessageQuery selects accepted messages, oldest first.
type MessageQuery struct {
	Tenant string
	// Topic is a topic pattern (see packs.MatchTopic); "" for any.
	Topic string
	// From is a sender; "" for any.
	From string
	// ReplyTo selects the replies to one message.
	ReplyTo string
	// After is a cursor: messages with Seq > After.
	After int64
	// Dead selects messages with a dead-lettered delivery.
	Dead  bool
	Limit int // 0: DefaultMessageLimit; at most MaxMessageLimit
}

const (
	DefaultMessageLimit = 100
	MaxMessageLimit     = 1000
)

// MessagePage is one page of a MessageQuery.
type MessagePage struct {
	Messages []MessageRecord `json:"messages"`
	// Next is the cursor of the next page (0 when this one is the last).
	Next int64 `json:"next,omitempty"`
}

// Messages is the bus's store.
type Messages interface {
	// PublishMessage accepts in, in one write: it refuses (ErrValidation)
	// a message whose PrevHash is not the hash of its sender's previous
	// accepted message (naming both hashes) or that leaves out a
	// prev_truth_state its sender's chain needs; an id already accepted
	// with the same hash is a duplicate (event message_duplicate,
	// nothing created), with another hash a conflict (ErrConflict).
	// Otherwise it stores the message, creates one task per subscription
	// whose patterns match its topic (SubscriberTaskType, priority
	// MessageQueuePriority, payload {"message_id", "topic", "sender",
	// "reply_to", "format", "document"}: the document as accepted, in
	// its own format), and appends message_accepted and a
	// message_delivered per task.
	PublishMessage(ctx context.Context, in *MessageInput) (*MessageReceipt, error)
	// Message returns one accepted message with its deliveries;
	// ErrNotFound if tenant has none with that id.
	Message(ctx context.Context, tenant, messageID string) (*MessageRecord, error)
	// ListMessages returns a page of accepted messages.
	ListMessages(ctx context.Context, q MessageQuery) (*MessagePage, error)
	// SetPackSubscriptions replaces the subscriptions of pack's nodes.
	SetPackSubscriptions(ctx context.Context, pack string, subs []Subscription) error
	// Subscriptions lists every subscription, by pack and node.
	Subscriptions(ctx context.Context) ([]Subscription, error)
	// ExpireMessages dead-letters the deliveries of messages whose ttl
	// ran out by now and whose task is pending or waiting to retry (the
	// task fails for good, status permanent_failure; events task_finished
	// and message_dead_lettered); it returns how many.
	ExpireMessages(ctx context.Context, now time.Time) (int, error)
}
