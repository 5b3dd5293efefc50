-- pgrunidempotency: openwop runs' Idempotency-Key (POST /v1/runs), as
-- internal/store/sqlite's migration 20: a tenant's key names the run it
-- started and the digest of the request, until expires_at (unix
-- milliseconds; storecore.CreateRunOnce). Applies again over itself.
CREATE TABLE IF NOT EXISTS openwop_run_idempotency (
	tenant TEXT NOT NULL,
	idem_key TEXT NOT NULL,
	digest TEXT NOT NULL,
	run_id TEXT NOT NULL,
	expires_at BIGINT NOT NULL,
	PRIMARY KEY (tenant, idem_key)
);
