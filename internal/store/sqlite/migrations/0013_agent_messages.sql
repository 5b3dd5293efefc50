-- agent messages: accepted messages (one per tenant
-- and id; the message_accepted event that chains each), one delivery
-- per subscriber (its task), each sender's chain head, and the
-- subscriptions of installed nodes.
CREATE TABLE messages (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	tenant TEXT NOT NULL,
	message_id TEXT NOT NULL,
	format TEXT NOT NULL,
	document TEXT NOT NULL,
	model TEXT NOT NULL,
	hash TEXT NOT NULL,
	sender TEXT NOT NULL,
	recipient TEXT NOT NULL,
	topic TEXT NOT NULL,
	kind TEXT NOT NULL,
	reply_to TEXT NOT NULL,
	priority INTEGER NOT NULL,
	expires_at TEXT NOT NULL,
	prev_hash TEXT NOT NULL,
	signed_by TEXT NOT NULL,
	origin TEXT NOT NULL,
	accepted_at TEXT NOT NULL,
	event_seq INTEGER NOT NULL,
	UNIQUE (tenant, message_id)
);
CREATE INDEX messages_topic ON messages (tenant, topic, seq);
CREATE INDEX messages_sender ON messages (tenant, sender, seq);
CREATE INDEX messages_reply ON messages (tenant, reply_to) WHERE reply_to != '';
CREATE TABLE message_deliveries (
	tenant TEXT NOT NULL,
	message_id TEXT NOT NULL,
	subscriber TEXT NOT NULL,
	task_id TEXT NOT NULL,
	status TEXT NOT NULL,
	expires_at TEXT NOT NULL,
	dead_at TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, message_id, subscriber)
);
CREATE INDEX message_deliveries_expiring ON message_deliveries (expires_at) WHERE status = 'queued' AND expires_at != '';
CREATE TABLE message_chains (
	tenant TEXT NOT NULL,
	sender TEXT NOT NULL,
	hash TEXT NOT NULL,
	message_id TEXT NOT NULL,
	chained INTEGER NOT NULL,
	PRIMARY KEY (tenant, sender)
);
CREATE TABLE message_subscriptions (
	pack TEXT NOT NULL,
	node TEXT NOT NULL,
	task_type TEXT NOT NULL,
	topics TEXT NOT NULL,
	PRIMARY KEY (pack, node)
);
