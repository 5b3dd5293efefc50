-- pgquota: quotas, as internal/store/sqlite's migration 16: the
-- transitions each workflow record has made (the workflow_steps
-- quota), and an index counting the active records of each tenant
-- (host.UsageCounter).
ALTER TABLE workflow_records ADD COLUMN transitions BIGINT NOT NULL DEFAULT 0;
CREATE INDEX workflow_records_status ON workflow_records (status, tenant);
