-- tenants and API tokens. A task belongs to the tenant that
-- enqueued it (its follow-ups to the same one); every task enqueued
-- before tenants belongs to the default one. A token
-- is stored without its secret: secret_hash is the SHA-256 of it
-- (internal/auth); scopes are comma-separated.
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
