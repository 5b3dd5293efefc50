// Package host defines the services a pack reaches through packrun:host/v1
// (task queue, key-value memory, evidence recording, the task type registry
// and the dispatch lock) as small interfaces, together with their domain
// types, which follow the agent runtime schema (TaskIntent, TaskRecord,
// TaskOutcome, ArtifactRecord, TaskTypeSpec, runtime events) and use its
// snake_case names in JSON.
//
// Implementations live in one package per backend: internal/sqlite is the
// embedded one. The canonical encodings that make the evidence log
// tamper-evident (HashEvent, HashAttempt) and the secret Redactor live here
// so that every backend, and every exported bundle, is checked the same way.
package host
