-- pgrunlease: run leases, as internal/store/sqlite's migration 14: the
-- node executing an openwop run (holder) and until when (lease_until,
-- Unix milliseconds; 0: none). Every node claims the runs whose lease
-- ended (ClaimRuns, FOR UPDATE SKIP LOCKED).
ALTER TABLE openwop_runs ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE openwop_runs ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
CREATE INDEX openwop_runs_unfinished ON openwop_runs (seq) WHERE status NOT IN ('completed', 'failed', 'cancelled');
