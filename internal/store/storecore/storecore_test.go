package storecore

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// SettleStatus decides in host.FinishInput's order.
func TestSettleStatus(t *testing.T) {
	task := func(attempt, max int, cancel bool) *host.TaskRecord {
		return &host.TaskRecord{AttemptCount: attempt, MaxAttempts: max, CancelRequested: cancel}
	}
	for _, c := range []struct {
		name    string
		t       *host.TaskRecord
		ms      host.MachineStatus
		rc      host.RetryClass
		missing []string
		want    host.TaskStatus
		wantErr string
	}{
		{"ok", task(1, 3, false), host.MachineOK, host.RetryNone, nil, host.TaskCompleted, ""},
		{"cancel requested wins", task(1, 3, true), host.MachineOK, host.RetryNone, nil, host.TaskOperatorCanceled, "canceled by the operator"},
		{"ok without evidence retries", task(1, 3, false), host.MachineOK, host.RetryNone, []string{"artifact path a"}, host.TaskRetryableFailure, "missing evidence: artifact path a"},
		{"no attempts left", task(3, 3, false), host.MachineNeedsRetry, host.RetryNone, nil, host.TaskPermanentFailure, "boom"},
		{"permanent class", task(1, 3, false), host.MachineNeedsRetry, host.RetryPermanent, nil, host.TaskPermanentFailure, "boom"},
		{"blocked", task(1, 3, false), host.MachineBlocked, host.RetryNone, nil, host.TaskBlocked, "boom"},
		{"failed but retryable class", task(1, 3, false), host.MachineFailed, host.RetryRetryable, nil, host.TaskRetryableFailure, "boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := "boom"
			if c.ms == host.MachineOK {
				msg = ""
			}
			got, lastErr := SettleStatus(c.t, c.ms, c.rc, msg, c.missing)
			if got != c.want || lastErr != c.wantErr {
				t.Fatalf("%s %q, want %s %q", got, lastErr, c.want, c.wantErr)
			}
		})
	}
}

// Follow-ups are attributed to their parent; one invalid refuses all.
func TestStageFollowUps(t *testing.T) {
	ok := host.TaskIntent{TaskType: "a", Source: "claimed", Payload: json.RawMessage(`{}`)}
	got, refused := StageFollowUps("task-1", []host.TaskIntent{ok})
	if refused != "" || len(got) != 1 || got[0].Source != "task:task-1" {
		t.Fatalf("%+v %q", got, refused)
	}
	got, refused = StageFollowUps("task-1", []host.TaskIntent{ok, {TaskType: "b"}})
	if got != nil || !strings.HasPrefix(refused, "follow-up 1: payload") {
		t.Fatalf("%+v %q", got, refused)
	}
	if _, refused = StageFollowUps("t", make([]host.TaskIntent, host.MaxFollowUps+1)); !strings.Contains(refused, "the limit is") {
		t.Fatal(refused)
	}
}

// MissingEvidence names what is required and not stored.
func TestMissingEvidence(t *testing.T) {
	tk := &host.TaskRecord{EvidenceRequirements: &host.EvidenceRequirements{RequiredArtifacts: []string{"plan", "r.md"}, RequireAdapterAudit: true}}
	out := &host.TaskOutcome{ArtifactPaths: []string{"x"}}
	if !WantsArtifacts(tk, out) || WantsArtifacts(&host.TaskRecord{}, &host.TaskOutcome{}) {
		t.Fatal("WantsArtifacts")
	}
	got := MissingEvidence(tk, out, map[string]bool{"r.md": true}, map[string]bool{"plan": true})
	if strings.Join(got, ",") != "adapter-audit artifact,artifact path x" {
		t.Fatal(got)
	}
}

// NormalizeAttempt fills defaults and compacts, and refuses with the
// field named.
func TestNormalizeAttempt(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	a := &host.Attempt{Outcome: abi.Failed, Input: json.RawMessage(`{ "a" : 1 }`)}
	if err := NormalizeAttempt(a, now); err != nil {
		t.Fatal(err)
	}
	if a.ExitStatus != host.ExitError || a.RetryClass != host.RetryNone || a.Tenant != host.DefaultTenant || string(a.Input) != `{"a":1}` || !a.StartedAt.Equal(now) || a.AttemptID == "" {
		t.Fatalf("%+v", a)
	}
	for field, bad := range map[string]*host.Attempt{
		"outcome":  {Outcome: "done"},
		"output":   {Outcome: abi.Completed, Output: json.RawMessage(`{`)},
		"ended_at": {Outcome: abi.Completed, StartedAt: now, EndedAt: now.Add(-time.Second)},
	} {
		var he *host.Error
		if err := NormalizeAttempt(bad, now); !errors.As(err, &he) || he.Field != field {
			t.Errorf("%s: %v", field, err)
		}
	}
}

// CheckAttemptRow accepts a row as recorded and refuses one changed.
func TestCheckAttemptRow(t *testing.T) {
	a := &host.Attempt{AttemptID: "att-1", Outcome: abi.Completed, Pack: "p@1.0.0"}
	if err := NormalizeAttempt(a, time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := evidence.AppendRecord(nil, a)
	row := &AttemptRow{Seq: 2, AttemptID: a.AttemptID, Tenant: a.Tenant, Pack: a.Pack, StartedAt: host.FormatTime(a.StartedAt),
		Record: rec, Prev: "prev", Hash: evidence.LinkAttempt(2, "prev", evidence.HashRecord(rec))}
	if brk := CheckAttemptRow(row, "prev"); brk != nil {
		t.Fatal(brk)
	}
	if brk := CheckAttemptRow(row, "other"); brk == nil || brk.Problem != host.BreakPrevHash {
		t.Fatal(brk)
	}
	row.Pack = "q@1.0.0"
	if brk := CheckAttemptRow(row, "prev"); brk == nil || brk.Problem != host.BreakAttemptHash {
		t.Fatal(brk)
	}
}

func TestCheckEvent(t *testing.T) {
	for _, c := range []struct {
		e    host.Event
		want error
	}{
		{host.Event{Type: "ok.type_1"}, nil},
		{host.Event{Type: "Bad"}, host.ErrValidation},
		{host.Event{Type: "x", Data: json.RawMessage(`{`)}, host.ErrValidation},
	} {
		if err := CheckEvent(c.e); !errors.Is(err, c.want) && (err != nil || c.want != nil) {
			t.Errorf("%+v: %v", c.e, err)
		}
	}
}
