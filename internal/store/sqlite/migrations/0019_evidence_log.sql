-- the evidence log (issue 33): a Merkle tree over the evidence chain's
-- entries (leaf i is the chain hash of seq i+1), integrated by the
-- sequencer (storecore.IntegrateLog). evidence_tiles holds the tree's
-- hashes in the C2SP tlog-tiles layout, the widest tile written at each
-- (level, idx); a tile may be widened, never narrowed nor rewritten.
-- evidence_log is the one row of the integrated size, root and newest
-- signed checkpoint; evidence_checkpoints keeps every checkpoint signed.
CREATE TABLE evidence_tiles (
	level INTEGER NOT NULL,
	idx INTEGER NOT NULL,
	width INTEGER NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (level, idx)
);
CREATE TRIGGER evidence_tiles_only_widen BEFORE UPDATE ON evidence_tiles
	WHEN NEW.level != OLD.level OR NEW.idx != OLD.idx OR NEW.width <= OLD.width
		OR substr(NEW.data, 1, length(OLD.data)) != OLD.data
	BEGIN SELECT RAISE(ABORT, 'evidence_tiles: a tile may only be widened'); END;
CREATE TRIGGER evidence_tiles_no_delete BEFORE DELETE ON evidence_tiles
	BEGIN SELECT RAISE(ABORT, 'evidence_tiles is append-only'); END;

CREATE TABLE evidence_log (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	size INTEGER NOT NULL,
	root BLOB NOT NULL,
	note TEXT NOT NULL,
	integrated_at TEXT NOT NULL
);
INSERT INTO evidence_log (id, size, root, note, integrated_at) VALUES (1, 0, X'', '', '');
CREATE TRIGGER evidence_log_only_grows BEFORE UPDATE ON evidence_log
	WHEN NEW.size < OLD.size OR NEW.id != OLD.id
	BEGIN SELECT RAISE(ABORT, 'evidence_log: the log only grows'); END;
CREATE TRIGGER evidence_log_no_delete BEFORE DELETE ON evidence_log
	BEGIN SELECT RAISE(ABORT, 'evidence_log is append-only'); END;

CREATE TABLE evidence_checkpoints (
	size INTEGER PRIMARY KEY,
	note TEXT NOT NULL,
	at TEXT NOT NULL
);
CREATE TRIGGER evidence_checkpoints_no_update BEFORE UPDATE ON evidence_checkpoints
	BEGIN SELECT RAISE(ABORT, 'evidence_checkpoints is append-only'); END;
CREATE TRIGGER evidence_checkpoints_no_delete BEFORE DELETE ON evidence_checkpoints
	BEGIN SELECT RAISE(ABORT, 'evidence_checkpoints is append-only'); END;
