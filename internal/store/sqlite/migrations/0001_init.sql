CREATE TABLE runtime_events (
	seq INTEGER PRIMARY KEY,
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
CREATE INDEX runtime_events_type ON runtime_events (type, seq);
CREATE TRIGGER runtime_events_no_update BEFORE UPDATE ON runtime_events
	BEGIN SELECT RAISE(ABORT, 'runtime_events is append-only'); END;
CREATE TRIGGER runtime_events_no_delete BEFORE DELETE ON runtime_events
	BEGIN SELECT RAISE(ABORT, 'runtime_events is append-only'); END;

CREATE TABLE task_attempts (
	attempt_id TEXT PRIMARY KEY,
	task_id TEXT NOT NULL,
	runner_id TEXT NOT NULL,
	pack TEXT NOT NULL,
	pack_name TEXT NOT NULL,
	module_sha256 TEXT NOT NULL,
	node TEXT NOT NULL,
	tenant TEXT NOT NULL,
	run_id TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	abi_version TEXT NOT NULL,
	input TEXT NOT NULL,
	output TEXT NOT NULL,
	interrupt TEXT NOT NULL,
	outcome TEXT NOT NULL,
	error TEXT NOT NULL,
	exit_status TEXT NOT NULL,
	retry_class TEXT NOT NULL,
	stdout BLOB NOT NULL,
	stderr BLOB NOT NULL,
	logs TEXT NOT NULL,
	events TEXT NOT NULL,
	trace TEXT NOT NULL,
	limits TEXT NOT NULL,
	adapter_calls TEXT NOT NULL,
	diagnostics TEXT NOT NULL,
	started_at TEXT NOT NULL,
	ended_at TEXT NOT NULL,
	content_hash TEXT NOT NULL,
	event_seq INTEGER NOT NULL
);
CREATE INDEX task_attempts_task ON task_attempts (task_id, event_seq) WHERE task_id != '';
CREATE INDEX task_attempts_pack ON task_attempts (pack_name, event_seq);
CREATE INDEX task_attempts_seq ON task_attempts (event_seq);
CREATE TRIGGER task_attempts_no_update BEFORE UPDATE ON task_attempts
	BEGIN SELECT RAISE(ABORT, 'task_attempts are immutable'); END;
CREATE TRIGGER task_attempts_no_delete BEFORE DELETE ON task_attempts
	BEGIN SELECT RAISE(ABORT, 'task_attempts are immutable'); END;

CREATE TABLE artifacts (
	artifact_id TEXT PRIMARY KEY,
	task_id TEXT NOT NULL,
	attempt_id TEXT NOT NULL,
	role TEXT NOT NULL,
	relative_path TEXT NOT NULL,
	content_type TEXT NOT NULL,
	sha256 TEXT NOT NULL,
	size INTEGER NOT NULL,
	created_at TEXT NOT NULL,
	verified_at TEXT,
	event_seq INTEGER NOT NULL,
	UNIQUE (task_id, attempt_id, relative_path)
);
CREATE INDEX artifacts_attempt ON artifacts (attempt_id) WHERE attempt_id != '';
CREATE INDEX artifacts_sha256 ON artifacts (sha256);

CREATE TABLE tasks (
	seq INTEGER PRIMARY KEY,
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
	cancel_requested INTEGER NOT NULL
);
CREATE INDEX tasks_ready ON tasks (priority, available_at, seq) WHERE status IN ('pending', 'retryable_failure');
CREATE INDEX tasks_status ON tasks (status, seq);
CREATE INDEX tasks_type ON tasks (task_type, seq);

CREATE TABLE memory_entries (
	tenant TEXT NOT NULL,
	namespace TEXT NOT NULL,
	key TEXT NOT NULL,
	value BLOB NOT NULL,
	secret INTEGER NOT NULL,
	size INTEGER NOT NULL,
	expires_at TEXT,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (tenant, namespace, key)
);
CREATE INDEX memory_entries_expiry ON memory_entries (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE memory_usage (
	tenant TEXT NOT NULL,
	namespace TEXT NOT NULL,
	bytes INTEGER NOT NULL,
	PRIMARY KEY (tenant, namespace)
);

CREATE TABLE task_type_routes (
	task_type TEXT NOT NULL,
	pack TEXT NOT NULL,
	node TEXT NOT NULL,
	spec TEXT NOT NULL,
	PRIMARY KEY (task_type, pack)
);
CREATE INDEX task_type_routes_pack ON task_type_routes (pack);
CREATE TABLE task_type_overrides (
	task_type TEXT PRIMARY KEY,
	pack TEXT NOT NULL,
	node TEXT NOT NULL,
	spec TEXT NOT NULL
);

CREATE TABLE dispatch_locks (
	name TEXT PRIMARY KEY,
	holder TEXT NOT NULL,
	acquired_at TEXT NOT NULL,
	expires_at TEXT NOT NULL
);
