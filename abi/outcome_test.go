package abi

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeTaskOutcome(t *testing.T) {
	r, err := DecodeResponse([]byte(`{"outcome":"completed","output":{"n":1},"taskOutcome":{"operator_summary":"2 files changed",
		"file_changes":["src/a.go","docs/b.md"],"workflow_signal":"verified","follow_up_tasks":[{"task_type":"notify","payload":{}}],
		"external_messages":[{"channel":"ops","text":"done"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	o := r.TaskOutcome
	if o == nil || o.OperatorSummary != "2 files changed" || len(o.FileChanges) != 2 || o.WorkflowSignal != "verified" ||
		len(o.FollowUpTasks) != 1 || string(o.ExternalMessages[0]) != `{"channel":"ops","text":"done"}` {
		t.Fatalf("%+v", o)
	}
	for _, b := range []string{`{"outcome":"completed"}`, `{"outcome":"completed","taskOutcome":null}`} {
		if r, err := DecodeResponse([]byte(b)); err != nil || r.TaskOutcome != nil {
			t.Fatalf("%s: %v %+v", b, err, r.TaskOutcome)
		}
	}
	if r, err := DecodeResponse([]byte(`{"outcome":"completed","taskOutcome":{}}`)); err != nil || r.TaskOutcome == nil {
		t.Fatalf("empty taskOutcome: %v", err)
	}
}

// Each refusal is ErrResponseTaskOutcome (CodeResponseTaskOutcome) and
// names the field at fault.
func TestDecodeTaskOutcomeRefused(t *testing.T) {
	long := strings.Repeat("x", MaxOperatorSummaryBytes+1)
	many := "[" + strings.Repeat(`{},`, MaxExternalMessages) + "{}]"
	for _, c := range []struct{ outcome, want string }{
		{`[]`, "taskOutcome is not a JSON object"},
		{`"done"`, "taskOutcome is not a JSON object"},
		{`{"summary":"x"}`, `unknown field "summary"`},
		{`{"operator_summary":1}`, "taskOutcome.operator_summary: must be a string"},
		{`{"operator_summary":"` + long + `"}`, "taskOutcome.operator_summary: is 4097 bytes"},
		{`{"file_changes":"a"}`, "taskOutcome.file_changes: must be an array"},
		{`{"file_changes":[1]}`, "taskOutcome.file_changes"},
		{`{"file_changes":["/etc/passwd"]}`, "taskOutcome.file_changes[0]: must be relative"},
		{`{"file_changes":["a","../b"]}`, `taskOutcome.file_changes[1]: "../b" is not a clean relative path`},
		{`{"file_changes":[""]}`, "taskOutcome.file_changes[0]: is empty"},
		{`{"workflow_signal":"` + strings.Repeat("s", MaxWorkflowSignalBytes+1) + `"}`, "taskOutcome.workflow_signal: is 257 bytes"},
		{`{"follow_up_tasks":[1]}`, "taskOutcome.follow_up_tasks[0]: must be a TaskIntent object"},
		{`{"follow_up_tasks":{}}`, "taskOutcome.follow_up_tasks: must be an array"},
		{`{"external_messages":["hi"]}`, "taskOutcome.external_messages[0]: must be a JSON object"},
		{`{"external_messages":` + many + `}`, "taskOutcome.external_messages: has 33 entries; the limit is 32"},
		{`{"external_messages":[{"t":"` + strings.Repeat("m", MaxExternalMessageBytes) + `"}]}`, "taskOutcome.external_messages[0]: is 65544 bytes"},
	} {
		_, err := DecodeResponse([]byte(`{"outcome":"completed","output":{},"taskOutcome":` + c.outcome + `}`))
		if !errors.Is(err, ErrResponseTaskOutcome) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: %v, want %q", c.outcome, err, c.want)
		}
	}
	_, err := DecodeResponse([]byte(`{"outcome":"failed","error":{"code":"x"},"taskOutcome":{}}`))
	if !errors.Is(err, ErrResponseTaskOutcome) || !strings.Contains(err.Error(), `only with outcome "completed"`) {
		t.Fatalf("taskOutcome on a failure: %v", err)
	}
}

// FuzzDecodeTaskOutcome: any taskOutcome decodes or is refused as
// ErrResponseTaskOutcome, and what is accepted is within the limits.
func FuzzDecodeTaskOutcome(f *testing.F) {
	for _, s := range []string{`{}`, `{"operator_summary":"s","file_changes":["a/b"],"workflow_signal":"w","follow_up_tasks":[{"task_type":"t"}],"external_messages":[{"a":1}]}`,
		`{"file_changes":["../x"]}`, `{"external_messages":[[]]}`, `[]`, `{"x":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, o string) {
		r, err := DecodeResponse([]byte(`{"outcome":"completed","taskOutcome":` + o + `}`))
		if err != nil {
			if !errors.Is(err, ErrResponseTaskOutcome) && !errors.Is(err, ErrResponseJSON) && !errors.Is(err, ErrResponseEnvelope) && !errors.Is(err, ErrResponseUTF8) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		to := r.TaskOutcome
		if to == nil {
			return
		}
		if len(to.OperatorSummary) > MaxOperatorSummaryBytes || len(to.FileChanges) > MaxFileChanges || len(to.ExternalMessages) > MaxExternalMessages || len(to.FollowUpTasks) > MaxFollowUpTasks {
			t.Fatalf("accepted over a limit: %q", o)
		}
		for _, p := range to.FileChanges {
			if checkRelPath(p) != nil {
				t.Fatalf("accepted file change %q", p)
			}
		}
	})
}
