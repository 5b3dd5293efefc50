-- the host key the evidence chain is anchored with, recorded when
-- the first checkpoint is signed and at each re-anchoring (the newest
-- row is the home's): a home with a record refuses to open when its
-- checkpoint or host key is lost (internal/evidence.Anchor.Open).
CREATE TABLE evidence_anchors (
	id INTEGER PRIMARY KEY AUTOINCREMENT,
	public_key TEXT NOT NULL,
	anchored_at TEXT NOT NULL
);
