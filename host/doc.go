// Package host holds the domain types of the agent runtime schema and the store
// interfaces: the services a pack reaches through packrun:host/v1 (task
// queue, key-value memory, evidence recording, the task type registry and
// the dispatch lock) as small interfaces, together with their domain types,
// which follow the agent runtime schema (TaskIntent, TaskRecord,
// TaskOutcome, ArtifactRecord, TaskTypeSpec, runtime events) and use its
// snake_case names in JSON.
//
// Implementations live under internal/: internal/store/sqlite is the embedded
// backend, and internal/evidence holds the canonical encodings that make
// the evidence log tamper-evident (evidence.HashEvent,
// evidence.HashAttempt), bundle verification and the secret Redactor.
package host
