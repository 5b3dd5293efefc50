-- pgconf: memory, the installed-pack index and its blobs, task type
-- routes and overrides, the agent runtime's configuration (task type
-- specs, agents, profiles), API tokens, and store_generations, the
-- counters every node reads (packs: moved in the transaction of each
-- install and uninstall; see packs.go). Keys that are listed in order
-- are COLLATE "C": byte order, as SQLite's BINARY, whatever the
-- database's locale. memory_usage holds a namespace's bytes; its row is
-- locked first by every write to the namespace (memory.go). Pack blobs
-- have a table of their own, apart from artifact bytes (blobs):
-- uninstalling deletes the pack blobs no installed pack names.
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
