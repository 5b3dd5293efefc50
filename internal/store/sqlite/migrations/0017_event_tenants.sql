-- every event's tenant, for GET /v1/events to filter
-- on: its task's, else its recorded attempt's, else the string
-- "tenant" of its data, else '' (an event of the whole host; see
-- storecore.DataTenant). It is not part of the event's hash. Events
-- stored before are filled here, the append-only trigger lifted for
-- that one statement.
ALTER TABLE runtime_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
DROP TRIGGER IF EXISTS runtime_events_no_update;
UPDATE runtime_events AS e SET tenant = COALESCE(
	(SELECT t.tenant FROM tasks t WHERE t.task_id = e.task_id AND e.task_id != ''),
	(SELECT a.tenant FROM attempt_records a WHERE a.attempt_id = e.attempt_id AND e.attempt_id != ''),
	CASE WHEN json_valid(e.data) THEN CASE WHEN json_type(e.data, '$.tenant') = 'text' THEN json_extract(e.data, '$.tenant') END END,
	'');
CREATE TRIGGER runtime_events_no_update BEFORE UPDATE ON runtime_events
	BEGIN SELECT RAISE(ABORT, 'runtime_events is append-only'); END;
CREATE INDEX runtime_events_tenant ON runtime_events (tenant, seq);
