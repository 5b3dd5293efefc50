-- Open looks for secret values still in plaintext (stored by an
-- older packrun) to seal them; this keeps that look to the secret
-- entries. Other entries pay only the check of the condition.
CREATE INDEX memory_entries_secret ON memory_entries (secret) WHERE secret = 1;
