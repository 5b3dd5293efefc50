-- pgvalues: attempt values stored out of line, as
-- internal/store/sqlite's migration 18: once per content, keyed by their
-- SHA-256 (hex), named by version 3 records; append-only. Written to
-- apply again over itself (a test re-applies the migrations after one).
CREATE TABLE IF NOT EXISTS evidence_values (
	digest TEXT COLLATE "C" PRIMARY KEY,
	value BYTEA NOT NULL
);
DROP TRIGGER IF EXISTS evidence_values_append_only ON evidence_values;
CREATE TRIGGER evidence_values_append_only BEFORE UPDATE OR DELETE ON evidence_values
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();
