-- the evidence log's key (RATIONALE.md, "Why one log key for a cluster,
-- given to every node as a file?"): the verifier key of the log key a
-- store was given (Options.LogSigner), recorded by the first checkpoint
-- it signs; '' while the log is signed by the home's host key. Once
-- recorded it never changes: a store given another key integrates
-- nothing (storecore.IntegrateLog).
ALTER TABLE evidence_log ADD COLUMN log_key TEXT NOT NULL DEFAULT '';
CREATE TRIGGER evidence_log_key_kept BEFORE UPDATE ON evidence_log
	WHEN OLD.log_key != '' AND NEW.log_key != OLD.log_key
	BEGIN SELECT RAISE(ABORT, 'evidence_log: the log key, once recorded, never changes'); END;
