-- the installed-pack index (host.Packs, packs.go) moves here. In
-- homes written by packrun before the single store, this very table was
-- created by its own migration set ("registry", 1): a packrun.db that
-- has it keeps it and its rows. That migration is recorded as applied,
-- so a packrun before the single store, opened on this database
-- afterwards, does not try to create the table again.
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
