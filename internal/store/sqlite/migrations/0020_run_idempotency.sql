-- openwop runs' Idempotency-Key (POST /v1/runs): a tenant's key names
-- the run it started and the digest of the request that started it,
-- until expires_at (unix milliseconds; storecore.CreateRunOnce).
CREATE TABLE IF NOT EXISTS openwop_run_idempotency (
	tenant TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	digest TEXT NOT NULL,
	run_id TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (tenant, idem_key)
);
