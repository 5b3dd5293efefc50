package storecore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// DefaultBackoff is the delay before retry number n (the attempts made so
// far, from 1): 30s·2^(n-1), at most 15 minutes.
func DefaultBackoff(n int) time.Duration {
	n = max(n, 1)
	if n > 6 {
		return 15 * time.Minute
	}
	return min(30*time.Second<<(n-1), 15*time.Minute)
}

// NewTask validates an intent (errors under op) and builds its pending
// record at now, with a new id; the caller sets its tenant.
func NewTask(op string, in *host.TaskIntent, maxAttempts int, now time.Time) (*host.TaskRecord, error) {
	if err := host.ValidateIntent(in); err != nil {
		var he *host.Error
		if errors.As(err, &he) {
			c := *he
			c.Op = op
			return nil, &c
		}
		return nil, err
	}
	switch {
	case maxAttempts == 0:
		maxAttempts = host.DefaultMaxAttempts
	case maxAttempts < 0 || maxAttempts > host.MaxMaxAttempts:
		return nil, host.Invalid(op, "max_attempts", "must be between 1 and %d", host.MaxMaxAttempts)
	}
	prio := host.DefaultPriority
	if in.Priority != nil {
		prio = *in.Priority
	}
	return &host.TaskRecord{
		TaskID: host.NewID("task"), TaskType: in.TaskType, Source: in.Source, Subject: in.Subject, Description: in.Description,
		Priority: prio, Payload: evidence.CompactJSON(in.Payload), RequestedProfileID: in.RequestedProfileID,
		RequestedAdapterID: in.RequestedAdapterID, RequestedModel: in.RequestedModel, SkillIDs: in.SkillIDs,
		WorkflowRef: in.WorkflowRef, EvidenceRequirements: in.EvidenceRequirements, Status: host.TaskPending,
		MaxAttempts: maxAttempts, AvailableAt: host.IntentAvailableAt(in, now), CreatedAt: now, UpdatedAt: now,
	}, nil
}

// JSONOrEmpty marshals v, or returns "" when empty (how the stores keep
// absent JSON columns).
func JSONOrEmpty(v any, empty bool) string {
	if empty {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// DecodeTaskJSON fills t's JSON columns from their stored text ("" for
// absent).
func DecodeTaskJSON(t *host.TaskRecord, skills, workflowRef, requirements, outcome, resume string) error {
	for _, f := range []struct {
		s string
		v any
	}{{skills, &t.SkillIDs}, {workflowRef, &t.WorkflowRef}, {requirements, &t.EvidenceRequirements}, {outcome, &t.Outcome}, {resume, &t.ResumeValues}} {
		if f.s != "" {
			if err := json.Unmarshal([]byte(f.s), f.v); err != nil {
				return fmt.Errorf("task %s: %w", t.TaskID, err)
			}
		}
	}
	return nil
}

// StageFollowUps validates the follow-ups of an attempt of task taskID
// (their source becomes "task:<id>"). If there are too many, or one is
// invalid, none is kept and refused says why.
func StageFollowUps(taskID string, in []host.TaskIntent) (followUps []host.TaskIntent, refused string) {
	if len(in) > host.MaxFollowUps {
		return nil, fmt.Sprintf("the attempt staged %d follow-up tasks; the limit is %d", len(in), host.MaxFollowUps)
	}
	size := 0
	for i, fu := range in {
		fu.Source = "task:" + taskID
		if err := host.ValidateIntent(&fu); err != nil {
			var he *host.Error
			if errors.As(err, &he) {
				return nil, fmt.Sprintf("follow-up %d: %s: %v", i, he.Field, he.Err)
			}
			return nil, fmt.Sprintf("follow-up %d: %v", i, err)
		}
		size += len(fu.Payload)
		followUps = append(followUps, fu)
	}
	if size > host.MaxFollowUpBytes {
		return nil, fmt.Sprintf("the attempt staged follow-up payloads of %d bytes; the limit is %d", size, host.MaxFollowUpBytes)
	}
	return followUps, ""
}

// CheckExternalMessages checks an outcome's external_messages.
func CheckExternalMessages(op string, msgs []json.RawMessage) error {
	if len(msgs) > host.MaxExternalMessages {
		return host.Invalid(op, "outcome.external_messages", "has %d entries; the limit is %d", len(msgs), host.MaxExternalMessages)
	}
	for i, m := range msgs {
		var obj map[string]json.RawMessage
		if len(m) > host.MaxExternalMessageBytes {
			return host.Invalid(op, "outcome.external_messages", "entry %d is %d bytes; the limit is %d", i, len(m), host.MaxExternalMessageBytes)
		}
		if json.Unmarshal(m, &obj) != nil || obj == nil {
			return host.Invalid(op, "outcome.external_messages", "entry %d is not a JSON object", i)
		}
	}
	return nil
}

// SettleStatus is the status a settlement gives t, and its last_error, as
// host.FinishInput documents; missing is the evidence the attempt lacks.
func SettleStatus(t *host.TaskRecord, ms host.MachineStatus, rc host.RetryClass, errMsg string, missing []string) (host.TaskStatus, string) {
	status, lastErr := host.TaskPermanentFailure, errMsg
	retryable := (ms == host.MachineNeedsRetry || ms == host.MachineOK || rc == host.RetryRetryable) && rc != host.RetryPermanent
	switch {
	case t.CancelRequested || ms == host.MachineCanceled:
		status = host.TaskOperatorCanceled
		if lastErr == "" {
			lastErr = "canceled by the operator"
		}
	case ms == host.MachineOK && len(missing) == 0:
		status, lastErr = host.TaskCompleted, ""
	case ms == host.MachineBlocked:
		status = host.TaskBlocked
	case retryable && t.AttemptCount < t.MaxAttempts:
		status = host.TaskRetryableFailure
	}
	if len(missing) > 0 {
		lastErr = strings.TrimPrefix(lastErr+"; missing evidence: "+strings.Join(missing, ", "), "; ")
	}
	return status, lastErr
}

// WantsArtifacts reports whether settling t with outcome must look at the
// attempt's artifacts (MissingEvidence).
func WantsArtifacts(t *host.TaskRecord, outcome *host.TaskOutcome) bool {
	er := t.EvidenceRequirements
	return len(outcome.ArtifactPaths) > 0 || er != nil && (len(er.RequiredArtifacts) > 0 || er.RequireFileChangeVerification || er.RequireAdapterAudit)
}

// MissingEvidence lists what t's evidence requirements and the outcome's
// artifact_paths ask for that the attempt's artifacts (their names and
// roles) do not hold.
func MissingEvidence(t *host.TaskRecord, outcome *host.TaskOutcome, names, roles map[string]bool) []string {
	var missing []string
	if er := t.EvidenceRequirements; er != nil {
		for _, r := range er.RequiredArtifacts {
			if !names[r] && !roles[r] {
				missing = append(missing, "required artifact "+r)
			}
		}
		if er.RequireFileChangeVerification {
			for _, p := range outcome.FileChanges {
				if !names[p] {
					missing = append(missing, "file change "+p)
				}
			}
		}
		if er.RequireAdapterAudit && !roles[string(host.RoleAdapterAudit)] {
			missing = append(missing, "adapter-audit artifact")
		}
	}
	for _, p := range outcome.ArtifactPaths {
		if !names[p] {
			missing = append(missing, "artifact path "+p)
		}
	}
	return missing
}

// AddResumeValue checks value (compacted) against t's resume values'
// limits and appends it.
func AddResumeValue(op string, t *host.TaskRecord, value json.RawMessage) error {
	size := len(value)
	for _, v := range t.ResumeValues {
		size += len(v)
	}
	if len(t.ResumeValues) >= host.MaxResumeValues {
		return host.Invalid(op, "value", "the task has been resumed %d times; the limit is %d", len(t.ResumeValues), host.MaxResumeValues)
	}
	if size > host.MaxResumeBytes {
		return host.Invalid(op, "value", "the task's resume values would be %d bytes; the limit is %d", size, host.MaxResumeBytes)
	}
	t.ResumeValues = append(t.ResumeValues, value)
	return nil
}

// TasksAfter is the keyset rule of ListTasks, which lists newest first
// (ORDER BY seq DESC): the tasks after the cursor task are those with a
// smaller seq; an unknown cursor lists none. %s is the driver's
// placeholder for host.TaskFilter.After.
const TasksAfter = ` AND seq < COALESCE((SELECT seq FROM tasks WHERE task_id = %s), 0)`
