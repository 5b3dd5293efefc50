-- the detached Ed25519 signature of an openwop registry pack is a
-- blob too; packrun before the single store kept it without indexing
-- it, so its sweep deleted it. NULL: none (and for every pack
-- installed before).
ALTER TABLE packs ADD COLUMN signature_sha256 TEXT;
