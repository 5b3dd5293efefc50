-- pganchors: the host keys the nodes anchor the evidence chain with,
-- as internal/store/sqlite's migration 15, one row per node key (each node
-- anchors in its own home): a node whose key has a row refuses to
-- open when its checkpoint is lost (internal/evidence.Anchor.Open).
CREATE TABLE evidence_anchors (
	id BIGSERIAL PRIMARY KEY,
	public_key TEXT COLLATE "C" NOT NULL,
	anchored_at TEXT NOT NULL
);
CREATE INDEX evidence_anchors_key ON evidence_anchors (public_key);
