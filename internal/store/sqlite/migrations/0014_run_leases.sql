-- run leases: the runner executing an openwop run (holder) and
-- until when (lease_until, Unix milliseconds; 0: none), so that a
-- run is continued by one node only and a stalled node's late
-- advance is refused (host.Runs).
ALTER TABLE openwop_runs ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE openwop_runs ADD COLUMN lease_until INTEGER NOT NULL DEFAULT 0;
