-- openwop runs: openwop workflow definitions (a list of
-- nodes naming installed pack typeIds, kept apart from seed 003's
-- workflow records), runs and each run's event log.
CREATE TABLE openwop_workflows (
	tenant TEXT NOT NULL,
	workflow_id TEXT NOT NULL,
	definition TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	PRIMARY KEY (tenant, workflow_id)
);
CREATE TABLE openwop_runs (
	run_id TEXT PRIMARY KEY,
	tenant TEXT NOT NULL,
	status TEXT NOT NULL,
	record TEXT NOT NULL
);
CREATE TABLE openwop_run_events (
	run_id TEXT NOT NULL,
	seq INTEGER NOT NULL,
	event TEXT NOT NULL,
	PRIMARY KEY (run_id, seq)
);
