-- pgeventtenant: every event's tenant, as internal/store/sqlite's migration
-- 17: its task's, else its recorded attempt's, else the
-- string "tenant" of its data, else '' (an event of the whole host;
-- storecore.DataTenant). Not part of the event's hash. Events stored
-- before are filled here, the append-only trigger disabled for that
-- one statement (in this transaction: no other writer sees it off).
ALTER TABLE runtime_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE runtime_events DISABLE TRIGGER runtime_events_append_only;
UPDATE runtime_events e SET tenant = COALESCE(
	(SELECT t.tenant FROM tasks t WHERE t.task_id = e.task_id AND e.task_id != ''),
	(SELECT a.tenant FROM attempt_records a WHERE a.attempt_id = e.attempt_id AND e.attempt_id != ''),
	CASE WHEN e.data LIKE '{%' THEN CASE WHEN jsonb_typeof(e.data::jsonb -> 'tenant') = 'string' THEN e.data::jsonb ->> 'tenant' END END,
	'');
ALTER TABLE runtime_events ENABLE TRIGGER runtime_events_append_only;
CREATE INDEX runtime_events_tenant ON runtime_events (tenant, seq);
