package storecore

import (
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
