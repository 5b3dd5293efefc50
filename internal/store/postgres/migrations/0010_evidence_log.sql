-- pgevidencelog: the evidence log, as internal/store/sqlite's migration
-- 19: tiles of the Merkle tree over the chain's entries (widened, never
-- narrowed), the one row of the integrated size (locked FOR UPDATE by
-- the sequencer: the fence between nodes), and every signed checkpoint.
-- Written to apply again over itself.
CREATE TABLE IF NOT EXISTS evidence_tiles (
	level BIGINT NOT NULL,
	idx BIGINT NOT NULL,
	width BIGINT NOT NULL,
	data BYTEA NOT NULL,
	PRIMARY KEY (level, idx)
);
CREATE OR REPLACE FUNCTION packrun_tile_widen() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.level <> OLD.level OR NEW.idx <> OLD.idx OR NEW.width <= OLD.width
		OR substring(NEW.data FROM 1 FOR length(OLD.data)) <> OLD.data THEN
		RAISE EXCEPTION 'evidence_tiles: a tile may only be widened';
	END IF;
	RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS evidence_tiles_only_widen ON evidence_tiles;
CREATE TRIGGER evidence_tiles_only_widen BEFORE UPDATE ON evidence_tiles
	FOR EACH ROW EXECUTE FUNCTION packrun_tile_widen();
DROP TRIGGER IF EXISTS evidence_tiles_no_delete ON evidence_tiles;
CREATE TRIGGER evidence_tiles_no_delete BEFORE DELETE ON evidence_tiles
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();

CREATE TABLE IF NOT EXISTS evidence_log (
	id BIGINT PRIMARY KEY CHECK (id = 1),
	size BIGINT NOT NULL,
	root BYTEA NOT NULL,
	note TEXT NOT NULL,
	integrated_at TEXT NOT NULL
);
INSERT INTO evidence_log (id, size, root, note, integrated_at) VALUES (1, 0, '', '', '')
	ON CONFLICT (id) DO NOTHING;
CREATE OR REPLACE FUNCTION packrun_log_grows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.size < OLD.size OR NEW.id <> OLD.id THEN
		RAISE EXCEPTION 'evidence_log: the log only grows';
	END IF;
	RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS evidence_log_only_grows ON evidence_log;
CREATE TRIGGER evidence_log_only_grows BEFORE UPDATE ON evidence_log
	FOR EACH ROW EXECUTE FUNCTION packrun_log_grows();
DROP TRIGGER IF EXISTS evidence_log_no_delete ON evidence_log;
CREATE TRIGGER evidence_log_no_delete BEFORE DELETE ON evidence_log
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();

CREATE TABLE IF NOT EXISTS evidence_checkpoints (
	size BIGINT PRIMARY KEY,
	note TEXT NOT NULL,
	at TEXT NOT NULL
);
DROP TRIGGER IF EXISTS evidence_checkpoints_append_only ON evidence_checkpoints;
CREATE TRIGGER evidence_checkpoints_append_only BEFORE UPDATE OR DELETE ON evidence_checkpoints
	FOR EACH ROW EXECUTE FUNCTION packrun_append_only();
