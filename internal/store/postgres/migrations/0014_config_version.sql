-- pgconfigversion: a version of the tables a task's setup is read from
-- (storecore.ReadTaskSetupRows: task_type_overrides, task_type_routes,
-- task_type_specs, agents), bumped in the transaction of every statement
-- that writes one of them. A claim returns it with its tasks, so that a
-- node reads a task type's setup again only when it changed
-- (setupCache). Applies again over itself.
CREATE TABLE IF NOT EXISTS config_version (
	id INT PRIMARY KEY CHECK (id = 1),
	version BIGINT NOT NULL
);
INSERT INTO config_version (id, version) VALUES (1, 1) ON CONFLICT (id) DO NOTHING;

CREATE OR REPLACE FUNCTION packrun_config_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE config_version SET version = version + 1 WHERE id = 1;
	RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS task_type_overrides_version ON task_type_overrides;
CREATE TRIGGER task_type_overrides_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON task_type_overrides
	FOR EACH STATEMENT EXECUTE FUNCTION packrun_config_changed();
DROP TRIGGER IF EXISTS task_type_routes_version ON task_type_routes;
CREATE TRIGGER task_type_routes_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON task_type_routes
	FOR EACH STATEMENT EXECUTE FUNCTION packrun_config_changed();
DROP TRIGGER IF EXISTS task_type_specs_version ON task_type_specs;
CREATE TRIGGER task_type_specs_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON task_type_specs
	FOR EACH STATEMENT EXECUTE FUNCTION packrun_config_changed();
DROP TRIGGER IF EXISTS agents_version ON agents;
CREATE TRIGGER agents_version AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON agents
	FOR EACH STATEMENT EXECUTE FUNCTION packrun_config_changed();
