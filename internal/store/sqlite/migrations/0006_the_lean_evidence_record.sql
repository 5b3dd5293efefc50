-- the lean evidence record. An attempt is one row: its record (one
-- binary encoding of every field, evidence.AppendRecord) and its link
-- in the hash chain (the previous entry's hash and its own, as events
-- have), at its place in the chain's sequence, which it
-- shares with runtime_events; its attempt_recorded event is built from
-- it when events are read. The columns besides record and hash are
-- copies of the record's header for the indexes and filters. Rows of
-- task_attempts, with their attempt_recorded events, are carried over
-- by moveLegacyAttempts (legacy.go) when the store is opened.
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
