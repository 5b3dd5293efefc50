-- pgpending: appends without the chain lock. A writer inserts its chain
-- entries pending: seq is the negative of a pend id drawn from
-- evidence_pend (in blocks of 1024 a node), pend keeps that id, and
-- prev_hash is '' (an attempt's hash holds its content hash until then).
-- The linker (link.go) later gives them their place under the chain
-- lock: seq, prev_hash and hash, in one UPDATE each, which the
-- append-only triggers allow once, from a negative seq to a positive one,
-- with every other column unchanged. Applies again over itself.
CREATE SEQUENCE IF NOT EXISTS evidence_pend INCREMENT BY 1024;
ALTER TABLE runtime_events ADD COLUMN IF NOT EXISTS pend BIGINT;
ALTER TABLE attempt_records ADD COLUMN IF NOT EXISTS pend BIGINT;

CREATE OR REPLACE FUNCTION packrun_event_linked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND OLD.seq < 0 AND NEW.seq > 0 AND OLD.prev_hash = ''
		AND NEW.pend IS NOT DISTINCT FROM OLD.pend AND NEW.time = OLD.time AND NEW.type = OLD.type
		AND NEW.task_id = OLD.task_id AND NEW.attempt_id = OLD.attempt_id AND NEW.data = OLD.data
		AND NEW.tenant IS NOT DISTINCT FROM OLD.tenant THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
DROP TRIGGER IF EXISTS runtime_events_append_only ON runtime_events;
CREATE TRIGGER runtime_events_append_only BEFORE UPDATE OR DELETE ON runtime_events
	FOR EACH ROW EXECUTE FUNCTION packrun_event_linked();

CREATE OR REPLACE FUNCTION packrun_attempt_linked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'UPDATE' AND OLD.seq < 0 AND NEW.seq > 0 AND OLD.prev_hash = ''
		AND NEW.pend IS NOT DISTINCT FROM OLD.pend AND NEW.attempt_id = OLD.attempt_id
		AND NEW.task_id = OLD.task_id AND NEW.attempt = OLD.attempt AND NEW.tenant = OLD.tenant
		AND NEW.pack = OLD.pack AND NEW.started_at = OLD.started_at AND NEW.record = OLD.record THEN
		RETURN NEW;
	END IF;
	RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END $$;
DROP TRIGGER IF EXISTS attempt_records_append_only ON attempt_records;
CREATE TRIGGER attempt_records_append_only BEFORE UPDATE OR DELETE ON attempt_records
	FOR EACH ROW EXECUTE FUNCTION packrun_attempt_linked();

-- The rows that cite a pending event's seq, found again when it is linked.
CREATE INDEX IF NOT EXISTS artifacts_pending ON artifacts (event_seq) WHERE event_seq < 0;
CREATE INDEX IF NOT EXISTS messages_pending ON messages (event_seq) WHERE event_seq < 0;
