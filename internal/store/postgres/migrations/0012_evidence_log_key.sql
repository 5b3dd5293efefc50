-- pglogkey: the evidence log's key, as internal/store/sqlite's migration
-- 21: the verifier key of the cluster's log key (Options.LogSigner),
-- recorded by the first checkpoint signed with it and never changed
-- after; '' while each node signs with its own host key. Applies again
-- over itself.
ALTER TABLE evidence_log ADD COLUMN IF NOT EXISTS log_key TEXT NOT NULL DEFAULT '';
CREATE OR REPLACE FUNCTION packrun_log_key_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF OLD.log_key <> '' AND NEW.log_key <> OLD.log_key THEN
		RAISE EXCEPTION 'evidence_log: the log key, once recorded, never changes';
	END IF;
	RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS evidence_log_key_kept ON evidence_log;
CREATE TRIGGER evidence_log_key_kept BEFORE UPDATE ON evidence_log
	FOR EACH ROW EXECUTE FUNCTION packrun_log_key_kept();
