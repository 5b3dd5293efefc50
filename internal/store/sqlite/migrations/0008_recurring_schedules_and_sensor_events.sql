-- recurring schedules (seed 003 §11b) and sensor events (§5).
-- schedule_runs holds one row per fired slot: its primary key is what
-- makes a slot yield at most one task, whatever two processes or a
-- crash do. sensor_events records every event a sensor reported; the
-- partial unique index is the durable dedupe on (sensor_id,
-- dedupe_key) among accepted events (a duplicate or an expired event
-- is recorded too, and holds no key).
CREATE TABLE schedules (
	schedule_id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	name TEXT NOT NULL,
	enabled INTEGER NOT NULL,
	interval_seconds INTEGER NOT NULL,
	next_run_at TEXT NOT NULL,
	last_run_at TEXT,
	task TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	UNIQUE (tenant, name)
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE enabled = 1;
CREATE TABLE schedule_runs (
	schedule_id TEXT NOT NULL,
	slot INTEGER NOT NULL,
	task_id TEXT NOT NULL,
	fired_at TEXT NOT NULL,
	PRIMARY KEY (schedule_id, slot)
);
CREATE TABLE sensor_events (
	seq INTEGER PRIMARY KEY,
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
	received_at TEXT NOT NULL
);
CREATE UNIQUE INDEX sensor_events_dedupe ON sensor_events (tenant, sensor_id, dedupe_key)
	WHERE status IN ('recorded', 'task_created', 'workflow_unsupported');
CREATE INDEX sensor_events_sensor ON sensor_events (sensor_id, seq);
