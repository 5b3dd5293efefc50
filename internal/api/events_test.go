package api

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// GET /v1/events pages through the chain with next_after, filters by type,
// task and time, and refuses a malformed filter naming it.
func TestListEvents(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	a := e.enqueue(helloIntent)
	b := e.enqueue(helloIntent)

	all := decode[eventPage](t, e.get("/v1/events"))
	if len(all.Events) < 4 || all.NextAfter != all.Events[len(all.Events)-1].Seq {
		t.Fatalf("events %+v", all)
	}
	var seen []int64
	after := int64(0)
	for {
		p := decode[eventPage](t, e.get("/v1/events?limit=1&after="+strconv.FormatInt(after, 10)))
		if len(p.Events) == 0 {
			if p.NextAfter != after {
				t.Fatalf("an empty page moved the cursor: %d, want %d", p.NextAfter, after)
			}
			break
		}
		seen = append(seen, p.Events[0].Seq)
		after = p.NextAfter
	}
	if len(seen) != len(all.Events) {
		t.Fatalf("paged %d events, listed %d", len(seen), len(all.Events))
	}
	for i, ev := range all.Events {
		if seen[i] != ev.Seq {
			t.Fatalf("page %d: seq %d, want %d", i, seen[i], ev.Seq)
		}
	}

	p := decode[eventPage](t, e.get("/v1/events?type=task_enqueued&task_id="+b.TaskID))
	if len(p.Events) != 1 || p.Events[0].TaskID != b.TaskID || p.Events[0].Type != "task_enqueued" {
		t.Fatalf("by type and task: %+v", p)
	}
	p = decode[eventPage](t, e.get("/v1/events?type=task_enqueued"))
	if len(p.Events) != 2 || p.Events[0].TaskID != a.TaskID {
		t.Fatalf("by type: %+v", p)
	}
	p = decode[eventPage](t, e.get("/v1/events?since="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	if len(p.Events) != 0 {
		t.Fatalf("since an hour ahead: %+v", p)
	}
	for _, c := range []struct{ query, field string }{
		{"type=Task", "type"}, {"since=yesterday", "since"}, {"after=-1", "after"}, {"after=x", "after"}, {"limit=0", "limit"}, {"kind=x", "kind"},
	} {
		wantError(t, e.get("/v1/events?"+c.query), http.StatusBadRequest, CodeInvalid, c.field)
	}
}
