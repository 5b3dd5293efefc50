-- the queue and the evidence chain. runtime_events and
-- attempt_records share one seq (the chain's); both are append-only.
-- tasks.lease_expires_at is the lease of a running task's holder
-- (runner_id, attempt_count): NULL unless running.
CREATE TABLE runtime_events (
	seq BIGINT PRIMARY KEY,
	time TEXT NOT NULL,
	type TEXT NOT NULL,
	task_id TEXT NOT NULL DEFAULT '',
	attempt_id TEXT NOT NULL DEFAULT '',
	data TEXT NOT NULL DEFAULT '',
	prev_hash TEXT NOT NULL,
	hash TEXT NOT NULL
);
CREATE INDEX runtime_events_task ON runtime_events (task_id, seq) WHERE task_id != '';
CREATE INDEX runtime_events_attempt ON runtime_events (attempt_id, seq) WHERE attempt_id != '';

CREATE TABLE attempt_records (
	seq BIGINT PRIMARY KEY,
	attempt_id TEXT NOT NULL UNIQUE,
	task_id TEXT NOT NULL,
	attempt BIGINT NOT NULL,
	tenant TEXT NOT NULL,
	pack TEXT NOT NULL,
	started_at TEXT NOT NULL,
	record BYTEA NOT NULL,
	prev_hash TEXT NOT NULL,
	hash TEXT NOT NULL
);
CREATE INDEX attempt_records_task ON attempt_records (task_id, seq) WHERE task_id != '';
CREATE INDEX attempt_records_tenant ON attempt_records (tenant, seq);

CREATE FUNCTION packrun_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
CREATE TRIGGER runtime_events_append_only BEFORE UPDATE OR DELETE ON runtime_events
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();
CREATE TRIGGER attempt_records_append_only BEFORE UPDATE OR DELETE ON attempt_records
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();

CREATE TABLE artifacts (
	artifact_id TEXT PRIMARY KEY,
	task_id TEXT NOT NULL,
	attempt_id TEXT NOT NULL,
	role TEXT NOT NULL,
	relative_path TEXT NOT NULL,
	content_type TEXT NOT NULL,
	sha256 TEXT NOT NULL,
	size BIGINT NOT NULL,
	created_at TEXT NOT NULL,
	verified_at TEXT,
	event_seq BIGINT NOT NULL,
	UNIQUE (task_id, attempt_id, relative_path)
);
CREATE INDEX artifacts_attempt ON artifacts (attempt_id) WHERE attempt_id != '';

CREATE TABLE tasks (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	task_id TEXT NOT NULL UNIQUE,
	task_type TEXT NOT NULL,
	source TEXT NOT NULL,
	subject TEXT NOT NULL,
	description TEXT NOT NULL,
	priority INTEGER NOT NULL,
	payload TEXT NOT NULL,
	requested_profile_id TEXT NOT NULL,
	requested_adapter_id TEXT NOT NULL,
	requested_model TEXT NOT NULL,
	skill_ids TEXT NOT NULL,
	workflow_ref TEXT NOT NULL,
	evidence_requirements TEXT NOT NULL,
	status TEXT NOT NULL,
	max_attempts INTEGER NOT NULL,
	attempt_count INTEGER NOT NULL,
	available_at TEXT NOT NULL,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	started_at TEXT,
	finished_at TEXT,
	outcome TEXT,
	last_error TEXT NOT NULL,
	parent_task_id TEXT NOT NULL,
	runner_id TEXT NOT NULL,
	cancel_requested BOOLEAN NOT NULL,
	tenant TEXT NOT NULL DEFAULT 'default',
	resume_values TEXT NOT NULL DEFAULT '',
	lease_expires_at TEXT
);
CREATE INDEX tasks_ready ON tasks (priority, available_at, seq) WHERE status IN ('pending', 'retryable_failure');
CREATE INDEX tasks_status ON tasks (status, seq);
CREATE INDEX tasks_type ON tasks (task_type, seq);
CREATE INDEX tasks_tenant ON tasks (tenant, seq);
CREATE INDEX tasks_lease ON tasks (lease_expires_at) WHERE status = 'running';

CREATE TABLE outbox_messages (
	seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
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

CREATE TABLE dispatch_locks (
	name TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	acquired_at TEXT NOT NULL,
	expires_at TEXT NOT NULL
);
