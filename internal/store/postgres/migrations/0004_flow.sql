-- pgflow: schedules and the slots they fired, sensor events, workflow
-- definitions (the built-in goal loop registered) and records, openwop
-- runs, and agent messages (accepted messages, deliveries, each
-- sender's chain head, subscriptions): internal/store/sqlite's tables, with
-- the uniqueness that makes several nodes safe. A slot fires once
-- because schedule_runs' key is (schedule_id, slot); a sensor dedupe
-- key is held by one accepted event (sensor_events_dedupe); a message
-- id by one message per tenant. A message's list cursor (its seq) is
-- its message_accepted event's seq, assigned under the chain lock, so
-- that cursors follow commit order across nodes. Keys listed or compared in order are
-- COLLATE "C" (byte order, as SQLite's, whatever the locale): topic
-- ranges ("p.*" is ["p.", "p/")) and stored times rely on it.
CREATE TABLE schedules (
	schedule_id TEXT PRIMARY KEY,
	tenant TEXT COLLATE "C" NOT NULL,
	name TEXT COLLATE "C" NOT NULL,
	enabled BOOLEAN NOT NULL,
	interval_seconds BIGINT NOT NULL,
	next_run_at TEXT COLLATE "C" NOT NULL,
	last_run_at TEXT,
	task TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	UNIQUE (tenant, name)
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled;
CREATE TABLE schedule_runs (
	schedule_id TEXT NOT NULL,
	slot BIGINT NOT NULL,
	task_id TEXT NOT NULL,
	fired_at TEXT NOT NULL,
	PRIMARY KEY (schedule_id, slot)
);

CREATE TABLE sensor_events (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	record_id TEXT NOT NULL UNIQUE,
	tenant TEXT NOT NULL,
	sensor_id TEXT NOT NULL,
	event_id TEXT NOT NULL,
	dedupe_key TEXT NOT NULL,
	status TEXT NOT NULL,
	detail TEXT NOT NULL,
	task_id TEXT NOT NULL,
	duplicate_of TEXT NOT NULL,
	origin TEXT NOT NULL,
	event TEXT NOT NULL,
	received_at TEXT NOT NULL,
	workflow_id TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX sensor_events_dedupe ON sensor_events (tenant, sensor_id, dedupe_key)
	WHERE status IN ('recorded', 'task_created', 'workflow_unsupported', 'workflow_created', 'workflow_deduped');
CREATE INDEX sensor_events_sensor ON sensor_events (sensor_id, seq);

CREATE TABLE workflows (
	workflow_type TEXT COLLATE "C" PRIMARY KEY,
	definition TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
INSERT INTO workflows (workflow_type, definition, updated_at) VALUES ('goal-loop', '{"workflow_type":"goal-loop","initial_state":"plan","states":[{"state_id":"plan","task_type":"goal.plan","transitions":[{"signal":"planned","next_state":"execute"}],"emits_task_intent":true},{"state_id":"execute","task_type":"goal.execute","transitions":[{"signal":"executed","next_state":"verify"}],"emits_task_intent":true},{"state_id":"verify","task_type":"goal.verify","transitions":[{"signal":"verified","next_state":"complete"},{"signal":"rejected","next_state":"execute"}],"completion_signals":["verified"],"emits_task_intent":true},{"state_id":"complete"}]}', '1970-01-01T00:00:00Z');
CREATE TABLE workflow_records (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	workflow_id TEXT NOT NULL UNIQUE,
	tenant TEXT NOT NULL,
	workflow_type TEXT NOT NULL,
	instance_key TEXT NOT NULL,
	current_state TEXT NOT NULL,
	context TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	completed_at TEXT,
	UNIQUE (tenant, workflow_type, instance_key)
);
CREATE INDEX workflow_records_type ON workflow_records (workflow_type, seq);

CREATE TABLE openwop_workflows (
	tenant TEXT NOT NULL,
	workflow_id TEXT NOT NULL,
	definition TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (tenant, workflow_id)
);
CREATE TABLE openwop_runs (
	seq BIGINT GENERATED ALWAYS AS IDENTITY,
	run_id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	status TEXT NOT NULL,
	record TEXT NOT NULL
);
CREATE TABLE openwop_run_events (
	run_id TEXT NOT NULL,
	seq BIGINT NOT NULL,
	event TEXT NOT NULL,
	PRIMARY KEY (run_id, seq)
);

CREATE TABLE messages (
	tenant TEXT NOT NULL,
	message_id TEXT NOT NULL,
	format TEXT NOT NULL,
	document TEXT NOT NULL,
	model TEXT NOT NULL,
	hash TEXT NOT NULL,
	sender TEXT NOT NULL,
	recipient TEXT NOT NULL,
	topic TEXT COLLATE "C" NOT NULL,
	kind TEXT NOT NULL,
	reply_to TEXT NOT NULL,
	priority INTEGER NOT NULL,
	expires_at TEXT NOT NULL,
	prev_hash TEXT NOT NULL,
	signed_by TEXT NOT NULL,
	origin TEXT NOT NULL,
	accepted_at TEXT NOT NULL,
	event_seq BIGINT NOT NULL,
	PRIMARY KEY (tenant, message_id)
);
CREATE INDEX messages_cursor ON messages (tenant, event_seq);
CREATE INDEX messages_topic ON messages (tenant, topic, event_seq);
CREATE INDEX messages_sender ON messages (tenant, sender, event_seq);
CREATE INDEX messages_reply ON messages (tenant, reply_to) WHERE reply_to != '';
CREATE TABLE message_deliveries (
	tenant TEXT NOT NULL,
	message_id TEXT NOT NULL,
	subscriber TEXT COLLATE "C" NOT NULL,
	task_id TEXT NOT NULL,
	status TEXT NOT NULL,
	expires_at TEXT COLLATE "C" NOT NULL,
	dead_at TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (tenant, message_id, subscriber)
);
CREATE INDEX message_deliveries_expiring ON message_deliveries (expires_at) WHERE status = 'queued' AND expires_at != '';
CREATE TABLE message_chains (
	tenant TEXT NOT NULL,
	sender TEXT NOT NULL,
	hash TEXT NOT NULL,
	message_id TEXT NOT NULL,
	chained BOOLEAN NOT NULL,
	PRIMARY KEY (tenant, sender)
);
CREATE TABLE message_subscriptions (
	pack TEXT COLLATE "C" NOT NULL,
	node TEXT COLLATE "C" NOT NULL,
	task_type TEXT NOT NULL,
	topics TEXT NOT NULL,
	PRIMARY KEY (pack, node)
);
