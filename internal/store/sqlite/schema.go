package sqlite

// migrations of the host's tables in packrun.db (component "host"); append
// only, never edit a published one.
var migrations = []string{
	`
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
`,
	// 2: nothing reads events by type alone (the CLI, the API and export
	// read by task or attempt), and the index cost every event insert a
	// B-tree update; an Events filter on type alone now scans.
	`DROP INDEX runtime_events_type;`,
	// 3: Open looks for secret values still in plaintext (stored by an
	// older packrun) to seal them; this keeps that look to the secret
	// entries. Other entries pay only the check of the condition.
	`CREATE INDEX memory_entries_secret ON memory_entries (secret) WHERE secret = 1;`,
	// 4: the installed-pack index (host.Packs, packs.go) moves here. In
	// homes written by packrun before the single store, this very table was
	// created by its own migration set ("registry", 1): a packrun.db that
	// has it keeps it and its rows. That migration is recorded as applied,
	// so a packrun before the single store, opened on this database
	// afterwards, does not try to create the table again.
	`
CREATE TABLE IF NOT EXISTS packs (
	name TEXT NOT NULL,
	version TEXT NOT NULL,
	archive_sha256 TEXT NOT NULL,
	size INTEGER NOT NULL,
	manifest BLOB NOT NULL,
	bundle_sha256 TEXT,
	provenance_sha256 TEXT,
	signer TEXT NOT NULL,
	key_id TEXT NOT NULL,
	provenance TEXT,
	installed_at TEXT NOT NULL,
	PRIMARY KEY (name, version)
);
INSERT OR IGNORE INTO schema_migrations (component, version, applied_at)
	VALUES ('registry', 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
`,
	// 5: the detached Ed25519 signature of an openwop registry pack is a
	// blob too; packrun before the single store kept it without indexing
	// it, so its sweep deleted it. NULL: none (and for every pack
	// installed before).
	`ALTER TABLE packs ADD COLUMN signature_sha256 TEXT;`,
	// 6: the lean evidence record. An attempt is one row: its record (one
	// binary encoding of every field, evidence.AppendRecord) and its link
	// in the hash chain (the previous entry's hash and its own, as events
	// have), at its place in the chain's sequence, which it
	// shares with runtime_events; its attempt_recorded event is built from
	// it when events are read. The columns besides record and hash are
	// copies of the record's header for the indexes and filters. Rows of
	// task_attempts, with their attempt_recorded events, are carried over
	// by moveLegacyAttempts (legacy.go) when the store is opened.
	`
CREATE TABLE attempt_records (
	seq INTEGER PRIMARY KEY,
	attempt_id TEXT NOT NULL UNIQUE,
	task_id TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	tenant TEXT NOT NULL,
	pack TEXT NOT NULL,
	started_at TEXT NOT NULL,
	record BLOB NOT NULL,
	prev_hash TEXT NOT NULL,
	hash TEXT NOT NULL
);
CREATE INDEX attempt_records_task ON attempt_records (task_id, seq) WHERE task_id != '';
CREATE TRIGGER attempt_records_no_update BEFORE UPDATE ON attempt_records
	BEGIN SELECT RAISE(ABORT, 'attempt records are immutable'); END;
CREATE TRIGGER attempt_records_no_delete BEFORE DELETE ON attempt_records
	BEGIN SELECT RAISE(ABORT, 'attempt records are immutable'); END;
`,
	// 7: tenants and API tokens. A task belongs to the tenant that
	// enqueued it (its follow-ups to the same one); every task enqueued
	// before tenants belongs to the default one. A token
	// is stored without its secret: secret_hash is the SHA-256 of it
	// (internal/auth); scopes are comma-separated.
	`
ALTER TABLE tasks ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
CREATE INDEX tasks_tenant ON tasks (tenant, seq);
CREATE INDEX attempt_records_tenant ON attempt_records (tenant, seq);
CREATE TABLE api_tokens (
	id TEXT PRIMARY KEY,
	name TEXT NOT NULL,
	tenant TEXT NOT NULL,
	scopes TEXT NOT NULL,
	secret_hash TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT,
	revoked_at TEXT
);
`,
	// 8: recurring schedules (seed 003 §11b) and sensor events (§5).
	// schedule_runs holds one row per fired slot: its primary key is what
	// makes a slot yield at most one task, whatever two processes or a
	// crash do. sensor_events records every event a sensor reported; the
	// partial unique index is the durable dedupe on (sensor_id,
	// dedupe_key) among accepted events (a duplicate or an expired event
	// is recorded too, and holds no key).
	`
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
`,
	// 9: operator controls and the outbox of task outcomes. A task keeps
	// the values operators resumed it with (a JSON array, '' for none),
	// handed to its node's openwop_interrupt calls in order. The
	// external_messages of a completed task's outcome wait in the outbox,
	// pending, for the agent messages issue to deliver them; nothing sends
	// them yet.
	`
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
`,
	// 10: the agent runtime's configuration (seed 003 §1, §1a, §1b, §3,
	// §13): the operator's task type specs, apart from routes; agents
	// (each row one agent FILE: identity, wallets, constitution, as JSON)
	// and subagent profiles. Replaced whole on re-add.
	`
CREATE TABLE task_type_specs (
	task_type TEXT PRIMARY KEY,
	spec TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE agents (
	agent_id TEXT PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE profiles (
	profile_id TEXT PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
`,
	// 11: workflows (seed 003 §10, §11; issue 17). Definitions are
	// shared by every tenant, one row per workflow_type, the definition as
	// JSON; the built-in goal-loop is registered here (an operator may
	// replace it). Records are unique per (tenant, workflow_type,
	// instance_key); context is '' for null. A sensor event records the
	// workflow its proposed_workflow created or found, and the statuses
	// that hold a sensor event's dedupe key gain workflow_created and
	// workflow_deduped.
	`
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
`,
	// 12: openwop runs (issue 17): openwop workflow definitions (a list of
	// nodes naming installed pack typeIds, kept apart from seed 003's
	// workflow records), runs and each run's event log.
	`
CREATE TABLE openwop_workflows (
	tenant TEXT NOT NULL,
	workflow_id TEXT NOT NULL,
	definition TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (tenant, workflow_id)
);
CREATE TABLE openwop_runs (
	run_id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	status TEXT NOT NULL,
	record TEXT NOT NULL
);
CREATE TABLE openwop_run_events (
	run_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	event TEXT NOT NULL,
	PRIMARY KEY (run_id, seq)
);
`,
	// 13: agent messages (issue 20): accepted messages (one per tenant
	// and id; the message_accepted event that chains each), one delivery
	// per subscriber (its task), each sender's chain head, and the
	// subscriptions of installed nodes.
	`
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
`,
	// 14: run leases: the runner executing an openwop run (holder) and
	// until when (lease_until, Unix milliseconds; 0: none), so that a
	// run is continued by one node only and a stalled node's late
	// advance is refused (host.Runs).
	`
ALTER TABLE openwop_runs ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE openwop_runs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
`,
	// 15: the host key the evidence chain is anchored with, recorded when
	// the first checkpoint is signed and at each re-anchoring (the newest
	// row is the home's): a home with a record refuses to open when its
	// checkpoint or host key is lost (internal/evidence.Anchor.Open).
	`
CREATE TABLE evidence_anchors (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	public_key TEXT NOT NULL,
	anchored_at TEXT NOT NULL
);
`,
	// 16: quotas (issue 29): the transitions each workflow record has
	// made (the workflow_steps quota), and an index counting the active
	// records of each tenant (host.UsageCounter).
	`
ALTER TABLE workflow_records ADD COLUMN transitions INTEGER NOT NULL DEFAULT 0;
CREATE INDEX workflow_records_status ON workflow_records (status, tenant);
`,
	// 17: every event's tenant (issue 29), for GET /v1/events to filter
	// on: its task's, else its recorded attempt's, else the string
	// "tenant" of its data, else '' (an event of the whole host; see
	// storecore.DataTenant). It is not part of the event's hash. Events
	// stored before are filled here, the append-only trigger lifted for
	// that one statement.
	`
ALTER TABLE runtime_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
DROP TRIGGER IF EXISTS runtime_events_no_update;
UPDATE runtime_events AS e SET tenant = COALESCE(
	(SELECT t.tenant FROM tasks t WHERE t.task_id = e.task_id AND e.task_id != ''),
	(SELECT a.tenant FROM attempt_records a WHERE a.attempt_id = e.attempt_id AND e.attempt_id != ''),
	CASE WHEN json_valid(e.data) THEN CASE WHEN json_type(e.data, '$.tenant') = 'text' THEN json_extract(e.data, '$.tenant') END END,
	'');
CREATE TRIGGER runtime_events_no_update BEFORE UPDATE ON runtime_events
	BEGIN SELECT RAISE(ABORT, 'runtime_events is append-only'); END;
CREATE INDEX runtime_events_tenant ON runtime_events (tenant, seq);
`,
	// 18: attempt values stored out of line (issue 30, item 3): a value
	// of an attempt of evidence.ValueMin bytes or more is stored once per
	// content under its SHA-256 (hex), and a version 3 record names it by
	// that digest. Records stored before keep their values inline.
	`
CREATE TABLE evidence_values (
	digest TEXT PRIMARY KEY,
	value BLOB NOT NULL
);
CREATE TRIGGER evidence_values_no_update BEFORE UPDATE ON evidence_values
	BEGIN SELECT RAISE(ABORT, 'evidence values are immutable'); END;
CREATE TRIGGER evidence_values_no_delete BEFORE DELETE ON evidence_values
	BEGIN SELECT RAISE(ABORT, 'evidence values are immutable'); END;
`,
}
