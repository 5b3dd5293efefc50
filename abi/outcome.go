package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// TaskOutcome is what a node may add to a completed response envelope,
// beside "output", as its top-level "taskOutcome" object: the fields of
// the agent runtime's TaskOutcome (the agent runtime schema §9) that only the node knows,
// named as the spec writes them. Every field is optional:
//
//	{"outcome":"completed","output":{...},
//	 "taskOutcome":{"operator_summary":"3 files formatted",
//	   "file_changes":["src/a.go"], "workflow_signal":"verified",
//	   "follow_up_tasks":[{"task_type":"notify","payload":{...}}],
//	   "external_messages":[{"channel":"ops","text":"done"}]}}
//
// When the invocation runs a task, the host keeps them with the task's
// outcome: operator_summary replaces the summary it would write itself,
// file_changes are checked against the attempt's artifacts when the task's
// evidence_requirements.require_file_change_verification asks, the
// workflow_signal is recorded, follow_up_tasks (TaskIntents) are enqueued
// when the task completes, as queue_enqueue follow-ups are (same limits),
// and external_messages wait in the host's outbox, undelivered until a
// messages handler exists, except agent messages in the publish form
// ({"format":"agent-envelope|agent-message|bus-envelope","message":{…}}),
// which are published on the bus as message_publish publishes them (same
// grant and topics; one refused fails the task). Outside a task (a bare
// invocation) it is decoded, checked and ignored.
//
// DecodeResponse checks it strictly: an unknown field, a wrong type, a
// limit passed (TaskOutcomeLimits), or "taskOutcome" with an outcome other
// than completed fails the invocation with CodeResponseTaskOutcome,
// naming the field.
type TaskOutcome struct {
	OperatorSummary  string            `json:"operator_summary,omitempty"`
	FileChanges      []string          `json:"file_changes,omitempty"`
	WorkflowSignal   string            `json:"workflow_signal,omitempty"`
	FollowUpTasks    []json.RawMessage `json:"follow_up_tasks,omitempty"`
	ExternalMessages []json.RawMessage `json:"external_messages,omitempty"`
}

// Limits of a TaskOutcome, checked by DecodeResponse.
const (
	MaxOperatorSummaryBytes = 4 << 10
	MaxFileChanges          = 256
	MaxFileChangeBytes      = 1024
	MaxWorkflowSignalBytes  = 256
	MaxFollowUpTasks        = 100 // host.MaxFollowUps
	MaxExternalMessages     = 32
	MaxExternalMessageBytes = 64 << 10
)

// ErrResponseTaskOutcome is returned by DecodeResponse for a taskOutcome
// it refuses (CodeResponseTaskOutcome).
var ErrResponseTaskOutcome = errors.New("response taskOutcome is invalid")

// decodeTaskOutcome decodes the raw "taskOutcome" value strictly.
func decodeTaskOutcome(raw []byte) (*TaskOutcome, error) {
	fail := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: taskOutcome.%s: %s", ErrResponseTaskOutcome, field, fmt.Sprintf(format, args...))
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, fmt.Errorf("%w: taskOutcome is not a JSON object", ErrResponseTaskOutcome)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var t TaskOutcome
	if err := dec.Decode(&t); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, fail(ute.Field, "must be %s", jsonKind(ute.Type.Kind().String()))
		}
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, fmt.Errorf("%w: taskOutcome: unknown field %s (want operator_summary, file_changes, workflow_signal, follow_up_tasks, external_messages)", ErrResponseTaskOutcome, f)
		}
		return nil, fmt.Errorf("%w: taskOutcome: %v", ErrResponseTaskOutcome, err)
	}
	if n := len(t.OperatorSummary); n > MaxOperatorSummaryBytes {
		return nil, fail("operator_summary", "is %d bytes; the limit is %d", n, MaxOperatorSummaryBytes)
	}
	if n := len(t.WorkflowSignal); n > MaxWorkflowSignalBytes {
		return nil, fail("workflow_signal", "is %d bytes; the limit is %d", n, MaxWorkflowSignalBytes)
	}
	if n := len(t.FileChanges); n > MaxFileChanges {
		return nil, fail("file_changes", "has %d entries; the limit is %d", n, MaxFileChanges)
	}
	for i, p := range t.FileChanges {
		if err := checkRelPath(p); err != nil {
			return nil, fail(fmt.Sprintf("file_changes[%d]", i), "%v", err)
		}
	}
	if n := len(t.FollowUpTasks); n > MaxFollowUpTasks {
		return nil, fail("follow_up_tasks", "has %d entries; the limit is %d", n, MaxFollowUpTasks)
	}
	for i, v := range t.FollowUpTasks {
		if len(v) == 0 || v[0] != '{' {
			return nil, fail(fmt.Sprintf("follow_up_tasks[%d]", i), "must be a TaskIntent object")
		}
	}
	if n := len(t.ExternalMessages); n > MaxExternalMessages {
		return nil, fail("external_messages", "has %d entries; the limit is %d", n, MaxExternalMessages)
	}
	for i, v := range t.ExternalMessages {
		if len(v) == 0 || v[0] != '{' {
			return nil, fail(fmt.Sprintf("external_messages[%d]", i), "must be a JSON object")
		}
		if len(v) > MaxExternalMessageBytes {
			return nil, fail(fmt.Sprintf("external_messages[%d]", i), "is %d bytes; the limit is %d", len(v), MaxExternalMessageBytes)
		}
	}
	return &t, nil
}

// jsonKind names a Go kind as the JSON type it decodes from.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "JSON of another type"
}

// checkRelPath: a file change is a clean relative path: not empty, no
// leading '/', no '..' or '.' segment, no NUL or backslash, within
// MaxFileChangeBytes.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return errors.New("is empty")
	case len(p) > MaxFileChangeBytes:
		return fmt.Errorf("is %d bytes; the limit is %d", len(p), MaxFileChangeBytes)
	case !utf8.ValidString(p) || strings.ContainsAny(p, "\x00\\"):
		return errors.New("must be a relative path with '/' separators")
	case strings.HasPrefix(p, "/"):
		return errors.New("must be relative, not start with '/'")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%q is not a clean relative path", p)
		}
	}
	return nil
}
