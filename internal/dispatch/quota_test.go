package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Follow-ups the host's quota refuses (Config.CheckFollowUps) are not
// enqueued, and the task fails naming the refusal; the hook is asked for
// the task's tenant and the number of follow-ups.
func TestFollowUpsRefusedByQuota(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, queueGrant)
	e.d.cfg.Packs = onePack{packOf(t, "envelope.wasm", "local.envelope", `[{"typeId":"test.envelope","kind":"skill","taskTypes":["envelope"]}]`, queueGrant)}
	if err := e.backend.SetPackTaskTypes(ctx, "local.envelope", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "envelope"}, Pack: "local.envelope", Node: "test.envelope"}}); err != nil {
		t.Fatal(err)
	}
	var asked []any
	e.d.cfg.CheckFollowUps = func(_ context.Context, tenant string, n int) error {
		asked = append(asked, tenant, n)
		return errors.New("quota queued_tasks exceeded")
	}
	response := `{"outcome":"completed","taskOutcome":{"follow_up_tasks":[{"task_type":"notify","payload":{}},{"task_type":"notify","payload":{}}]}}`
	task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "envelope", Source: "test", Payload: json.RawMessage(response)},
		host.EnqueueOptions{MaxAttempts: 1, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.backend.Claim(ctx, "runner", time.Now())
	if err != nil || claimed.TaskID != task.TaskID {
		t.Fatalf("claim: %v %v", err, claimed)
	}
	e.d.RunTask(ctx, claimed)
	rec, err := e.backend.Task(ctx, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != host.TaskPermanentFailure || !strings.Contains(rec.LastError, "quota queued_tasks") {
		t.Fatalf("%s (%s), want failed naming the quota", rec.Status, rec.LastError)
	}
	if len(asked) != 2 || asked[0] != "acme" || asked[1] != 2 {
		t.Fatalf("asked %v, want [acme 2]", asked)
	}
	if kids, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "notify"}); len(kids) != 0 {
		t.Fatalf("follow-ups enqueued: %+v", kids)
	}
}
