package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
)

func TestDecodeIntent(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		field string // "" means valid
	}{
		{"minimal", `{"task_type":"a.b","source":"sensor:x","payload":{}}`, ""},
		{"full", `{"task_type":"a","source":"s","subject":"s","priority":0,"skill_ids":["x"],"schedule":{"delay_minutes":5},
			"payload":{"k":[1]},"evidence_requirements":{"required_artifacts":["r.md"]},"workflow_ref":{"workflow_id":"w","state_id":"s","instance_key":"i"}}`, ""},
		{"priority not an integer", `{"task_type":"a","source":"s","payload":{},"priority":1.5}`, "priority"},
		{"priority a string", `{"task_type":"a","source":"s","payload":{},"priority":"high"}`, "priority"},
		{"delay not an integer", `{"task_type":"a","source":"s","payload":{},"schedule":{"delay_minutes":"5"}}`, "schedule.delay_minutes"},
		{"unknown field", `{"task_type":"a","source":"s","payload":{},"model":"x"}`, "model"},
		{"payload a string", `{"task_type":"a","source":"s","payload":"{}"}`, "payload"},
		{"no task type", `{"source":"s","payload":{}}`, "task_type"},
		{"not an object", `[1]`, ""},
		{"trailing data", `{"task_type":"a","source":"s","payload":{}} {}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := DecodeIntent([]byte(tt.in))
			valid := tt.field == "" && !strings.HasPrefix(tt.name, "not") && !strings.HasPrefix(tt.name, "trailing")
			if valid {
				if err != nil {
					t.Fatal(err)
				}
				if in.TaskType == "" {
					t.Fatal("not decoded")
				}
				return
			}
			if !errors.Is(err, ErrValidation) || ABIStatus(err) != abi.StatusValidation {
				t.Fatalf("err %v", err)
			}
			var he *Error
			if !errors.As(err, &he) || he.Field != tt.field {
				t.Fatalf("field %q, want %q (%v)", he.Field, tt.field, err)
			}
			t.Log(err)
		})
	}
	p := 0
	if in, _ := DecodeIntent([]byte(`{"task_type":"a","source":"s","payload":{},"priority":0}`)); in.Priority == nil || *in.Priority != p {
		t.Fatal("explicit priority 0 lost")
	}
}

func TestIntentAvailableAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	in := TaskIntent{Schedule: &Schedule{DelayMinutes: 90}}
	if got := IntentAvailableAt(&in, now); !got.Equal(now.Add(90 * time.Minute)) {
		t.Fatal(got)
	}
	in = TaskIntent{AvailableAt: "2026-01-01T02:00:00+02:00"}
	if got := IntentAvailableAt(&in, now); !got.Equal(now) || got.Location() != time.UTC {
		t.Fatal(got)
	}
}

func TestABIStatus(t *testing.T) {
	tests := []struct {
		err  error
		want abi.Status
	}{
		{nil, abi.StatusOK},
		{Errorf("memory get", "n/k", ErrNotFound, ""), abi.StatusNotFound},
		{Errorf("memory get", "n/k", ErrAccessDenied, "namespace n is not granted"), abi.StatusAccessDenied},
		{Invalid("enqueue", "payload", "must be a JSON object"), abi.StatusValidation},
		{Errorf("put artifact", "x", ErrConflict, "exists"), abi.StatusValidation},
		{Errorf("memory put", "n/k", ErrTooLarge, "too big"), abi.StatusCapabilityBreach},
		{fmt.Errorf("wrapped: %w", Errorf("memory get", "n/k", ErrNotFound, "")), abi.StatusNotFound},
		{errors.New("disk on fire"), abi.StatusHostError},
	}
	for _, tt := range tests {
		if got := ABIStatus(tt.err); got != tt.want {
			t.Errorf("ABIStatus(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if got := Invalid("enqueue", "payload", "must be a JSON object").Error(); got != "enqueue: payload: must be a JSON object" {
		t.Fatal(got)
	}
	if got := Errorf("memory get", "notes/k1", ErrNotFound, "").Error(); got != "memory get notes/k1: not found" {
		t.Fatal(got)
	}
}

func TestRetryable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{Wrap("finish", "task-1", errors.New("commit: disk I/O error: file too large")), true},
		{Errorf("finish", "task-1", ErrUnavailable, "the disk is full"), true},
		{fmt.Errorf("record attempt: %w", errors.New("database is locked")), true},
		{Errorf("finish", "task-1", ErrConflict, "task is not running"), false},
		{Errorf("finish", "task-1", ErrNotFound, ""), false},
		{Invalid("finish", "outcome", "bad"), false},
		{Errorf("memory put", "n/k", ErrTooLarge, "too big"), false},
		{Wrap("finish", "task-1", ErrClosed), false},
		{fmt.Errorf("finish: %w", context.Canceled), false},
	} {
		if got := Retryable(tt.err); got != tt.want {
			t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("task"), NewID("task")
	if a == b || !strings.HasPrefix(a, "task_") || len(a) != len("task_")+12+20 {
		t.Fatal(a, b)
	}
}

// FuzzDecodeIntent: a task intent from untrusted bytes (a guest's
// queue_enqueue, an API body) is either a valid intent that survives a
// round trip, or a one-line validation error of bounded size that names
// no more of the input than a short field name.
func FuzzDecodeIntent(f *testing.F) {
	for _, s := range []string{
		`{"task_type":"a.b","source":"sensor:x","payload":{}}`,
		`{"task_type":"a","source":"s","subject":"s","priority":0,"skill_ids":["x"],"schedule":{"delay_minutes":5},"payload":{"k":[1]},"evidence_requirements":{"required_artifacts":["r.md"]},"workflow_ref":{"workflow_id":"w","state_id":"s","instance_key":"i"}}`,
		`{"task_type":"a","source":"s","payload":{},"available_at":"2026-01-02T15:04:05Z"}`,
		`{"task_type":"a","source":"s","payload":{},"priority":"high"}`,
		`{"task_type":"a","source":"s","payload":{},"` + strings.Repeat("k", 5000) + `":1}`,
		`[1]`, `{}`, `{"task_type":"a","source":"s","payload":{}} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in, err := DecodeIntent(b)
		if err != nil {
			var he *Error
			if !errors.As(err, &he) || !(errors.Is(err, ErrValidation) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("error %T %v is not a validation error", err, err)
			}
			msg := err.Error()
			if strings.ContainsAny(msg, "\n\r") || len(msg) > 512 || len(he.Field) > 128 {
				t.Fatalf("error of %d bytes (field %d bytes), or not one line: %.200q", len(msg), len(he.Field), msg)
			}
			return
		}
		if err := ValidateIntent(&in); err != nil {
			t.Fatalf("decoded an invalid intent: %v", err)
		}
		again, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeIntent(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if twice, _ := json.Marshal(back); string(twice) != string(again) {
			t.Fatalf("round trip changed the intent:\n%s\n%s", again, twice)
		}
	})
}
