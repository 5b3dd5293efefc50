package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations of the host's tables, in order; append only, never edit a
// published one. The first is the end state of internal/store/sqlite's
// migrations for the tables this backend uses, plus what several nodes
// need (tasks.lease_expires_at).
var migrations = []string{
	// 1: the queue and the evidence chain. runtime_events and
	// attempt_records share one seq (the chain's); both are append-only.
	// tasks.lease_expires_at is the lease of a running task's holder
	// (runner_id, attempt_count): NULL unless running.
	`
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
`,
	// 2: content-addressed bytes every node reads: artifact contents, by
	// their sha256 (hex). Stored in the database rather than on a shared
	// file system, so that a node needs nothing but the database.
	`
CREATE TABLE blobs (
	sha256 TEXT PRIMARY KEY,
	data BYTEA NOT NULL
);
`,
	// pgconf: memory, the installed-pack index and its blobs, task type
	// routes and overrides, the agent runtime's configuration (task type
	// specs, agents, profiles), API tokens, and store_generations, the
	// counters every node reads (packs: moved in the transaction of each
	// install and uninstall; see packs.go). Keys that are listed in order
	// are COLLATE "C": byte order, as SQLite's BINARY, whatever the
	// database's locale. memory_usage holds a namespace's bytes; its row is
	// locked first by every write to the namespace (memory.go). Pack blobs
	// have a table of their own, apart from artifact bytes (blobs):
	// uninstalling deletes the pack blobs no installed pack names.
	`
CREATE TABLE memory_entries (
	tenant TEXT NOT NULL,
	namespace TEXT NOT NULL,
	key TEXT COLLATE "C" NOT NULL,
	value BYTEA NOT NULL,
	secret BOOLEAN NOT NULL,
	size BIGINT NOT NULL,
	expires_at TEXT,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (tenant, namespace, key)
);
CREATE INDEX memory_entries_expiry ON memory_entries (expires_at) WHERE expires_at IS NOT NULL;
CREATE TABLE memory_usage (
	tenant TEXT NOT NULL,
	namespace TEXT NOT NULL,
	bytes BIGINT NOT NULL,
	PRIMARY KEY (tenant, namespace)
);

CREATE TABLE packs (
	name TEXT COLLATE "C" NOT NULL,
	version TEXT COLLATE "C" NOT NULL,
	archive_sha256 TEXT NOT NULL,
	size BIGINT NOT NULL,
	manifest BYTEA NOT NULL,
	bundle_sha256 TEXT,
	provenance_sha256 TEXT,
	signature_sha256 TEXT,
	signer TEXT NOT NULL,
	key_id TEXT NOT NULL,
	provenance TEXT,
	installed_at TEXT NOT NULL,
	PRIMARY KEY (name, version)
);
CREATE TABLE pack_blobs (
	sha256 TEXT PRIMARY KEY,
	data BYTEA NOT NULL
);

CREATE TABLE store_generations (
	name TEXT PRIMARY KEY,
	value BIGINT NOT NULL
);
INSERT INTO store_generations (name, value) VALUES ('packs', 1);

CREATE TABLE task_type_routes (
	task_type TEXT COLLATE "C" NOT NULL,
	pack TEXT COLLATE "C" NOT NULL,
	node TEXT NOT NULL,
	spec TEXT NOT NULL,
	PRIMARY KEY (task_type, pack)
);
CREATE INDEX task_type_routes_pack ON task_type_routes (pack);
CREATE TABLE task_type_overrides (
	task_type TEXT COLLATE "C" PRIMARY KEY,
	pack TEXT NOT NULL,
	node TEXT NOT NULL,
	spec TEXT NOT NULL
);

CREATE TABLE task_type_specs (
	task_type TEXT COLLATE "C" PRIMARY KEY,
	spec TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE agents (
	agent_id TEXT COLLATE "C" PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE profiles (
	profile_id TEXT COLLATE "C" PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);

CREATE TABLE api_tokens (
	id TEXT COLLATE "C" PRIMARY KEY,
	name TEXT NOT NULL,
	tenant TEXT NOT NULL,
	scopes TEXT NOT NULL,
	secret_hash TEXT NOT NULL,
	created_at TEXT NOT NULL,
	expires_at TEXT,
	revoked_at TEXT
);
`,
	// pgflow: schedules and the slots they fired, sensor events, workflow
	// definitions (the built-in goal loop registered) and records, openwop
	// runs, and agent messages (accepted messages, deliveries, each
	// sender's chain head, subscriptions): internal/store/sqlite's tables, with
	// the uniqueness that makes several nodes safe. A slot fires once
	// because schedule_runs' key is (schedule_id, slot); a sensor dedupe
	// key is held by one accepted event (sensor_events_dedupe); a message
	// id by one message per tenant. A message's list cursor (its seq) is
	// its message_accepted event's seq, assigned under the chain lock, so
	// that cursors follow commit order across nodes. Keys listed or compared in order are
	// COLLATE "C" (byte order, as SQLite's, whatever the locale): topic
	// ranges ("p.*" is ["p.", "p/")) and stored times rely on it.
	`
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
`,
	// pgrunlease: run leases, as internal/store/sqlite's migration 14: the
	// node executing an openwop run (holder) and until when (lease_until,
	// Unix milliseconds; 0: none). Every node claims the runs whose lease
	// ended (ClaimRuns, FOR UPDATE SKIP LOCKED).
	`
ALTER TABLE openwop_runs ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE openwop_runs ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
CREATE INDEX openwop_runs_unfinished ON openwop_runs (seq) WHERE status NOT IN ('completed', 'failed', 'cancelled');
`,
	// pganchors: the host keys the nodes anchor the evidence chain with,
	// as internal/store/sqlite's migration 15, one row per node key (each node
	// anchors in its own home): a node whose key has a row refuses to
	// open when its checkpoint is lost (internal/evidence.Anchor.Open).
	`
CREATE TABLE evidence_anchors (
	id BIGSERIAL PRIMARY KEY,
	public_key TEXT COLLATE "C" NOT NULL,
	anchored_at TEXT NOT NULL
);
CREATE INDEX evidence_anchors_key ON evidence_anchors (public_key);
`,
	// pgquota: quotas (issue 29), as internal/store/sqlite's migration 16: the
	// transitions each workflow record has made (the workflow_steps
	// quota), and an index counting the active records of each tenant
	// (host.UsageCounter).
	`
ALTER TABLE workflow_records ADD COLUMN transitions BIGINT NOT NULL DEFAULT 0;
CREATE INDEX workflow_records_status ON workflow_records (status, tenant);
`,
	// pgeventtenant: every event's tenant, as internal/store/sqlite's migration
	// 17 (issue 29): its task's, else its recorded attempt's, else the
	// string "tenant" of its data, else '' (an event of the whole host;
	// storecore.DataTenant). Not part of the event's hash. Events stored
	// before are filled here, the append-only trigger disabled for that
	// one statement (in this transaction: no other writer sees it off).
	`
ALTER TABLE runtime_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE runtime_events DISABLE TRIGGER runtime_events_append_only;
UPDATE runtime_events e SET tenant = COALESCE(
	(SELECT t.tenant FROM tasks t WHERE t.task_id = e.task_id AND e.task_id != ''),
	(SELECT a.tenant FROM attempt_records a WHERE a.attempt_id = e.attempt_id AND e.attempt_id != ''),
	CASE WHEN e.data LIKE '{%' THEN CASE WHEN jsonb_typeof(e.data::jsonb -> 'tenant') = 'string' THEN e.data::jsonb ->> 'tenant' END END,
	'');
ALTER TABLE runtime_events ENABLE TRIGGER runtime_events_append_only;
CREATE INDEX runtime_events_tenant ON runtime_events (tenant, seq);
`,
	// pgvalues: attempt values stored out of line (issue 30, item 3), as
	// internal/store/sqlite's migration 18: once per content, keyed by their
	// SHA-256 (hex), named by version 3 records; append-only. Written to
	// apply again over itself (a test re-applies the migrations after one).
	`
CREATE TABLE IF NOT EXISTS evidence_values (
	digest TEXT COLLATE "C" PRIMARY KEY,
	value BYTEA NOT NULL
);
DROP TRIGGER IF EXISTS evidence_values_append_only ON evidence_values;
CREATE TRIGGER evidence_values_append_only BEFORE UPDATE OR DELETE ON evidence_values
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();
`,
}

// Advisory lock keys (pg_advisory_xact_lock's bigint space is the whole
// database's: these spell "packrun" and a purpose).
const (
	// ChainLock serialises appends to the evidence chain.
	ChainLock int64 = 0x7061636b72756e01
	// migrateLock serialises migrations of nodes starting at once.
	migrateLock int64 = 0x7061636b72756e02
)

// migrate applies the migrations not yet recorded in schema_migrations,
// each recorded with its number, all in one transaction under a
// transaction-level advisory lock: several nodes starting at once apply
// each migration once, the others waiting and then finding it recorded.
func migrate(ctx context.Context, s *Store) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	// A starting node migrates, not a paused one: the short idle limit
	// set for paused nodes (Options.LeaseTTL) must not end a migration
	// whose round trips a loaded machine slows down.
	if _, err := tx.Exec(ctx, `SET LOCAL `+idleInTx+` = 0`); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	var have int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return err
	}
	if have > len(migrations) {
		return fmt.Errorf("the database is at migration %d; this packrun knows %d: upgrade packrun", have, len(migrations))
	}
	for i := have; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, migrations[i], pgx.QueryExecModeSimpleProtocol); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, i+1, ts(s.now())); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
