-- pgpending: appends without the chain lock. A writer inserts its chain
-- entries pending: seq is the negative of a pend id drawn from
-- evidence_pend (in blocks of 1024 a node), pend keeps that id, and
-- prev_hash is '' (an attempt's hash holds its content hash until then).
-- The linker (link.go) later gives them their place under the chain
-- lock: seq, prev_hash and hash, which the append-only triggers allow
-- once, from a negative seq to a positive one, with every other column
-- unchanged. Applies again over itself.
CREATE SEQUENCE IF NOT EXISTS evidence_pend INCREMENT BY 1024;
ALTER TABLE runtime_events ADD COLUMN IF NOT EXISTS pend BIGINT;
ALTER TABLE attempt_records ADD COLUMN IF NOT EXISTS pend BIGINT;

-- The triggers' conditions are WHEN clauses, evaluated without calling a
-- function for the row a link moves (the linker updates every entry
-- once); every comparison is IS NOT DISTINCT FROM, so that a NULL never
-- lets a change through. An event's tenant (not hashed: the index of
-- the tenant's listing) is not named, so that migration 8, which adds it,
-- still applies again over itself.
DROP TRIGGER IF EXISTS runtime_events_append_only ON runtime_events;
CREATE TRIGGER runtime_events_append_only BEFORE UPDATE ON runtime_events FOR EACH ROW
	WHEN (NOT (OLD.seq < 0 AND NEW.seq > 0 AND OLD.prev_hash = ''
		AND NEW.pend IS NOT DISTINCT FROM OLD.pend AND NEW.time IS NOT DISTINCT FROM OLD.time
		AND NEW.type IS NOT DISTINCT FROM OLD.type AND NEW.task_id IS NOT DISTINCT FROM OLD.task_id
		AND NEW.attempt_id IS NOT DISTINCT FROM OLD.attempt_id AND NEW.data IS NOT DISTINCT FROM OLD.data))
	EXECUTE FUNCTION packrun_append_only();
DROP TRIGGER IF EXISTS runtime_events_no_delete ON runtime_events;
CREATE TRIGGER runtime_events_no_delete BEFORE DELETE ON runtime_events
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();

DROP TRIGGER IF EXISTS attempt_records_append_only ON attempt_records;
CREATE TRIGGER attempt_records_append_only BEFORE UPDATE ON attempt_records FOR EACH ROW
	WHEN (NOT (OLD.seq < 0 AND NEW.seq > 0 AND OLD.prev_hash = ''
		AND NEW.pend IS NOT DISTINCT FROM OLD.pend AND NEW.attempt_id IS NOT DISTINCT FROM OLD.attempt_id
		AND NEW.task_id IS NOT DISTINCT FROM OLD.task_id AND NEW.attempt IS NOT DISTINCT FROM OLD.attempt
		AND NEW.tenant IS NOT DISTINCT FROM OLD.tenant AND NEW.pack IS NOT DISTINCT FROM OLD.pack
		AND NEW.started_at IS NOT DISTINCT FROM OLD.started_at AND NEW.record IS NOT DISTINCT FROM OLD.record))
	EXECUTE FUNCTION packrun_append_only();
DROP TRIGGER IF EXISTS attempt_records_no_delete ON attempt_records;
CREATE TRIGGER attempt_records_no_delete BEFORE DELETE ON attempt_records
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();

-- The rows that cite a pending event's seq, found again when it is linked.
CREATE INDEX IF NOT EXISTS artifacts_pending ON artifacts (event_seq) WHERE event_seq < 0;
CREATE INDEX IF NOT EXISTS messages_pending ON messages (event_seq) WHERE event_seq < 0;
