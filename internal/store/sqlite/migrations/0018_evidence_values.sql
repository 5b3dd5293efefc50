-- attempt values stored out of line: a value
-- of an attempt of evidence.ValueMin bytes or more is stored once per
-- content under its SHA-256 (hex), and a version 3 record names it by
-- that digest. Records stored before keep their values inline.
CREATE TABLE evidence_values (
	digest TEXT PRIMARY KEY,
	value BLOB NOT NULL
);
CREATE TRIGGER evidence_values_no_update BEFORE UPDATE ON evidence_values
	BEGIN SELECT RAISE(ABORT, 'evidence values are immutable'); END;
CREATE TRIGGER evidence_values_no_delete BEFORE DELETE ON evidence_values
	BEGIN SELECT RAISE(ABORT, 'evidence values are immutable'); END;
