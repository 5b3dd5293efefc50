package storecore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// NormalizeAttempt validates an attempt and puts it in its stored form
// (defaults filled, JSON compacted, times in UTC, now for a missing
// time), so that every backend hashes the same record.
func NormalizeAttempt(a *host.Attempt, now time.Time) error {
	const op = "record attempt"
	if a.AttemptID == "" {
		a.AttemptID = host.NewID("att")
	} else if err := host.CheckID(op, "attempt_id", a.AttemptID); err != nil {
		return err
	}
	if a.TaskID != "" {
		if err := host.CheckID(op, "task_id", a.TaskID); err != nil {
			return err
		}
	}
	if a.Tenant == "" {
		a.Tenant = host.DefaultTenant
	}
	// 0 is an attempt number (openwop counts from 0).
	if a.Attempt < 0 {
		return host.Invalid(op, "attempt", "must be 0 or more")
	}
	if err := normalizeStatus(op, a); err != nil {
		return err
	}
	if err := normalizeJSON(op, a); err != nil {
		return err
	}
	if len(a.Stdout) == 0 {
		a.Stdout = nil
	}
	if len(a.Stderr) == 0 {
		a.Stderr = nil
	}
	if a.StartedAt.IsZero() {
		a.StartedAt = now
	}
	if a.EndedAt.IsZero() {
		a.EndedAt = now
	}
	a.StartedAt, a.EndedAt = a.StartedAt.UTC(), a.EndedAt.UTC()
	if a.EndedAt.Before(a.StartedAt) {
		return host.Invalid(op, "ended_at", "is before started_at")
	}
	return nil
}

// normalizeStatus checks outcome, exit_status and retry_class, filling the
// defaults.
func normalizeStatus(op string, a *host.Attempt) error {
	switch a.Outcome {
	case abi.Completed, abi.Suspended, abi.Failed:
	default:
		return host.Invalid(op, "outcome", "must be completed, suspended or failed")
	}
	if a.ExitStatus == "" {
		a.ExitStatus = host.ExitOK
		if a.Outcome == abi.Failed {
			a.ExitStatus = host.ExitError
		}
	}
	switch a.ExitStatus {
	case host.ExitOK, host.ExitError, host.ExitTimeout:
	default:
		return host.Invalid(op, "exit_status", "must be ok, error or timeout")
	}
	if a.RetryClass == "" {
		a.RetryClass = host.RetryNone
	}
	switch a.RetryClass {
	case host.RetryNone, host.RetryRetryable, host.RetryPermanent:
	default:
		return host.Invalid(op, "retry_class", "must be none, retryable or permanent")
	}
	return nil
}

// normalizeJSON validates and compacts the attempt's JSON fields (unless
// the caller promised they are: a.Compact).
func normalizeJSON(op string, a *host.Attempt) error {
	for _, f := range a.JSONFields() {
		switch {
		case len(*f.Value) == 0:
			*f.Value = nil
		case a.Compact:
		case !json.Valid(*f.Value):
			return host.Invalid(op, f.Name, "is not valid JSON")
		default:
			*f.Value = evidence.CompactJSON(*f.Value)
		}
	}
	if a.Error != nil {
		e := *a.Error
		if len(e.Details) == 0 {
			e.Details = nil
		} else if !a.Compact {
			if !json.Valid(e.Details) {
				return host.Invalid(op, "error.details", "is not valid JSON")
			}
			e.Details = evidence.CompactJSON(e.Details)
		}
		a.Error = &e
	}
	return nil
}

// CheckEvent checks an event AppendEvent is given: its type (lower-case
// letters, digits, '_' and '.', 1..64 bytes) and its data (JSON, at most
// host.MaxPayloadBytes).
func CheckEvent(e host.Event) error {
	const op = "append event"
	switch {
	case e.Type == "":
		return host.Invalid(op, "type", "required")
	case len(e.Type) > 64 || strings.Trim(e.Type, "abcdefghijklmnopqrstuvwxyz0123456789_.") != "":
		return host.Invalid(op, "type", "must be 1 to 64 lower-case letters, digits, '_' or '.'")
	case len(e.Data) > 0 && !json.Valid(e.Data):
		return host.Invalid(op, "data", "is not valid JSON")
	case len(e.Data) > host.MaxPayloadBytes:
		return host.Errorf(op, e.Type, host.ErrTooLarge, "data is %d bytes; the limit is %d", len(e.Data), host.MaxPayloadBytes)
	}
	return nil
}

// An event's tenant is stored beside it (runtime_events.tenant, outside
// its hash) for GET /v1/events to filter on: the tenant of its task if it
// names one, else of its attempt if it names a recorded one, else the
// string "tenant" of its data's top level (schedule_upserted,
// workflow_created, sensor_event_recorded, message_accepted, api_call,
// ... carry one), else none: '' marks an event of the whole host
// (dispatch_*, task_types_updated, workflow_upserted, ...). The stores
// apply the rule as they append an event, and their migrations applied it
// to the events stored before.

// DataTenant is the string "tenant" at the top level of an event's data,
// or "" (no such key, not a string, data not a JSON object). Data without
// the bytes "tenant" (most events: those of a task's life) is not parsed.
func DataTenant(data []byte) string {
	if !bytes.Contains(data, []byte(`"tenant"`)) {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return ""
	}
	var t string
	if json.Unmarshal(m["tenant"], &t) != nil {
		return ""
	}
	return t
}

// EventTenant is DataTenant of data, the JSON v marshalled to, read from v
// itself where v is a map whose "tenant" is a string or absent (or a
// map[string]string: an API call's audit event, host.Audit), without
// parsing data again: the stores' own events (their data a map) are
// appended inside a write transaction, where a parse costs every writer.
func EventTenant(v any, data []byte) string {
	switch m := v.(type) {
	case map[string]string:
		return m["tenant"]
	case map[string]any:
		switch t := m["tenant"].(type) {
		case nil: // absent, or null
			return ""
		case string:
			return t
		}
	}
	return DataTenant(data)
}

// EventTenantSQLite is the rule above as an SQLite expression over a
// runtime_events row named e, for a copy from a store older than the
// column (internal/store/postgres's ImportSQLite). The migrations that filled
// the column write it out as it was when they were published.
const EventTenantSQLite = `COALESCE(
	(SELECT t.tenant FROM tasks t WHERE t.task_id = e.task_id AND e.task_id != ''),
	(SELECT a.tenant FROM attempt_records a WHERE a.attempt_id = e.attempt_id AND e.attempt_id != ''),
	CASE WHEN json_valid(e.data) THEN CASE WHEN json_type(e.data, '$.tenant') = 'text' THEN json_extract(e.data, '$.tenant') END END,
	'')`

// ArtifactEventData is the data of a's artifact_recorded event: what
// CheckArtifact compares with the stored record, and the tenant of an
// artifact of no task (in.Tenant; its attempt may not be recorded yet).
func ArtifactEventData(a *host.Artifact, in host.ArtifactInput) map[string]any {
	d := map[string]any{"artifact_id": a.ArtifactID, "sha256": a.SHA256, "size": a.Size, "role": a.Role, "relative_path": a.RelativePath}
	if in.TaskID == "" && in.Tenant != "" {
		d["tenant"] = in.Tenant
	}
	return d
}

// checkRelPath: a clean relative slash path without "..", 1..256 bytes.
func checkRelPath(op, field, p string) error {
	if err := host.CheckID(op, field, p); err != nil {
		return err
	}
	if len(p) > 256 {
		return host.Invalid(op, field, "is %d bytes; the limit is 256", len(p))
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p || p == "." || p == ".." || strings.HasPrefix(p, "../") {
		return host.Invalid(op, field, "must be a clean relative path such as reports/run.md")
	}
	return nil
}

// CheckArtifactInput checks what PutArtifact is given; maxBytes caps the
// data.
func CheckArtifactInput(op string, in host.ArtifactInput, maxBytes int64) error {
	if in.TaskID == "" && in.AttemptID == "" {
		return host.Invalid(op, "task_id", "a task_id or an attempt_id is required")
	}
	if in.Tenant != "" {
		if err := host.CheckTenant(op, in.Tenant); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"task_id", in.TaskID}, {"attempt_id", in.AttemptID}} {
		if f.v != "" {
			if err := host.CheckID(op, f.name, f.v); err != nil {
				return err
			}
		}
	}
	if !in.Role.Valid() {
		return host.Invalid(op, "role", "must be one of plan, execute-report, verify-report, output, snapshot, adapter-audit")
	}
	if err := checkRelPath(op, "name", in.Name); err != nil {
		return err
	}
	if len(in.ContentType) > 255 {
		return host.Invalid(op, "content_type", "is longer than 255 bytes")
	}
	if int64(len(in.Data)) > maxBytes {
		return host.Errorf(op, in.Name, host.ErrTooLarge, "is %d bytes; the limit is %d", len(in.Data), maxBytes)
	}
	return nil
}

// AttemptEvent is the attempt_recorded event of the record stored at seq,
// with the links stored beside it. A version 1 record carries the event
// it was recorded with.
func AttemptEvent(seq int64, rec []byte, prev, hash string) (*host.Event, error) {
	a, l, err := evidence.DecodeRecord(rec)
	if err != nil {
		return nil, fmt.Errorf("attempt at seq %d: %w", seq, err)
	}
	if l != nil {
		return evidence.LegacyAttemptEvent(a, l, seq, prev, hash), nil
	}
	e := evidence.AttemptEvent(a, seq, prev)
	// The stored link, not the one the record implies: a changed record
	// then shows as an event whose hash does not match.
	e.Hash = hash
	return e, nil
}

// MergeEvents merges stored events and attempts' events, each in seq
// order, into at most limit events in seq order.
func MergeEvents(stored, recorded []*host.Event, limit int) []*host.Event {
	out := make([]*host.Event, 0, min(limit, len(stored)+len(recorded)))
	for len(out) < limit && (len(stored) > 0 || len(recorded) > 0) {
		if len(recorded) == 0 || (len(stored) > 0 && stored[0].Seq < recorded[0].Seq) {
			out, stored = append(out, stored[0]), stored[1:]
		} else {
			out, recorded = append(out, recorded[0]), recorded[1:]
		}
	}
	return out
}
