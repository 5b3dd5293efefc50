-- workflows (seed 003 §10, §11). Definitions are
-- shared by every tenant, one row per workflow_type, the definition as
-- JSON; the built-in goal-loop is registered here (an operator may
-- replace it). Records are unique per (tenant, workflow_type,
-- instance_key); context is '' for null. A sensor event records the
-- workflow its proposed_workflow created or found, and the statuses
-- that hold a sensor event's dedupe key gain workflow_created and
-- workflow_deduped.
CREATE TABLE workflows (
	workflow_type TEXT PRIMARY KEY,
	definition TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
INSERT INTO workflows (workflow_type, definition, updated_at) VALUES ('goal-loop', '{"workflow_type":"goal-loop","initial_state":"plan","states":[{"state_id":"plan","task_type":"goal.plan","transitions":[{"signal":"planned","next_state":"execute"}],"emits_task_intent":true},{"state_id":"execute","task_type":"goal.execute","transitions":[{"signal":"executed","next_state":"verify"}],"emits_task_intent":true},{"state_id":"verify","task_type":"goal.verify","transitions":[{"signal":"verified","next_state":"complete"},{"signal":"rejected","next_state":"execute"}],"completion_signals":["verified"],"emits_task_intent":true},{"state_id":"complete"}]}', '1970-01-01T00:00:00Z');
CREATE TABLE workflow_records (
	seq INTEGER PRIMARY KEY,
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
ALTER TABLE sensor_events ADD COLUMN workflow_id TEXT NOT NULL DEFAULT '';
DROP INDEX sensor_events_dedupe;
CREATE UNIQUE INDEX sensor_events_dedupe ON sensor_events (tenant, sensor_id, dedupe_key)
	WHERE status IN ('recorded', 'task_created', 'workflow_unsupported', 'workflow_created', 'workflow_deduped');
