-- content-addressed bytes every node reads: artifact contents, by
-- their sha256 (hex). Stored in the database rather than on a shared
-- file system, so that a node needs nothing but the database.
CREATE TABLE blobs (
	sha256 TEXT PRIMARY KEY,
	data BYTEA NOT NULL
);
