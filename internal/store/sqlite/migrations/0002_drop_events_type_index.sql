-- nothing reads events by type alone (the CLI, the API and export
-- read by task or attempt), and the index cost every event insert a
-- B-tree update; an Events filter on type alone now scans.
DROP INDEX runtime_events_type;
