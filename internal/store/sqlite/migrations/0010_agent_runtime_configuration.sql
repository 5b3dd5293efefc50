-- the agent runtime's configuration (seed 003 §1, §1a, §1b, §3,
-- §13): the operator's task type specs, apart from routes; agents
-- (each row one agent FILE: identity, wallets, constitution, as JSON)
-- and subagent profiles. Replaced whole on re-add.
CREATE TABLE task_type_specs (
	task_type TEXT PRIMARY KEY,
	spec TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE agents (
	agent_id TEXT PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
CREATE TABLE profiles (
	profile_id TEXT PRIMARY KEY,
	record TEXT NOT NULL,
	updated_at TEXT NOT NULL
);
