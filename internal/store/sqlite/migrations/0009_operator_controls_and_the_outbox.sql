-- operator controls and the outbox of task outcomes. A task keeps
-- the values operators resumed it with (a JSON array, '' for none),
-- handed to its node's openwop_interrupt calls in order. The
-- external_messages of a completed task's outcome wait in the outbox,
-- pending, for the agent messages issue to deliver them; nothing sends
-- them yet.
ALTER TABLE tasks ADD COLUMN resume_values TEXT NOT NULL DEFAULT '';
CREATE TABLE outbox_messages (
	seq INTEGER PRIMARY KEY,
	message_id TEXT NOT NULL UNIQUE,
	task_id TEXT NOT NULL,
	attempt_id TEXT NOT NULL,
	tenant TEXT NOT NULL,
	message TEXT NOT NULL,
	status TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX outbox_messages_task ON outbox_messages (task_id, seq);
CREATE INDEX outbox_messages_pending ON outbox_messages (seq) WHERE status = 'pending';
