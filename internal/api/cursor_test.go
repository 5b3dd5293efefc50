package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// pageThrough follows next_cursor from path (which has a ? already) and
// returns the ids of every page, checking the pages end.
func pageThrough[P any](t *testing.T, e *env, path string, items func(P) []string, next func(P) string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 20 {
			t.Fatalf("%s: the cursor does not end", path)
		}
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := e.get(p)
		wantStatus(t, r, http.StatusOK)
		page := decode[P](t, r)
		out = append(out, items(page)...)
		if cursor = next(page); cursor == "" {
			return out
		}
	}
}

// GET /v1/tasks pages newest first with cursor / next_cursor, filters
// included, and the pages are the whole list.
func TestTasksCursor(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	for range 5 {
		e.enqueue(helloIntent)
	}
	all := ids(e.listTasks(""))
	got := pageThrough(t, e, "/v1/tasks?limit=2", func(p taskList) []string { return ids(p.Tasks) }, func(p taskList) string { return p.NextCursor })
	if len(all) != 5 || !slices.Equal(got, all) {
		t.Fatalf("paged %v, listed %v", got, all)
	}
	got = pageThrough(t, e, "/v1/tasks?limit=5&status=pending", func(p taskList) []string { return ids(p.Tasks) }, func(p taskList) string { return p.NextCursor })
	if !slices.Equal(got, all) {
		t.Fatalf("with a filter: paged %v, listed %v", got, all)
	}
	// The last page of a full one is empty, and says so.
	last := decode[taskList](t, e.get("/v1/tasks?cursor="+all[4]))
	if len(last.Tasks) != 0 || last.NextCursor != "" {
		t.Fatalf("after the oldest: %+v", last)
	}
}

// GET /v1/attempts pages newest first with cursor / next_cursor.
func TestAttemptsCursor(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	var want []string
	for i := range 5 {
		at := &host.Attempt{Pack: helloRef, ModuleSHA256: strings.Repeat("0", 64), Node: helloNode, RunID: fmt.Sprintf("run-%d", i),
			ABIVersion: "1.0", Input: json.RawMessage(`{}`), Output: json.RawMessage(`{}`), Outcome: abi.Completed,
			Limits:    json.RawMessage(`{"memoryBytes":65536,"timeoutMs":100}`),
			StartedAt: time.Now().UTC(), EndedAt: time.Now().UTC()}
		if err := e.backend.RecordAttempt(context.Background(), at); err != nil {
			t.Fatal(err)
		}
		want = append([]string{at.AttemptID}, want...)
	}
	attIDs := func(p attemptList) []string {
		var out []string
		for _, a := range p.Attempts {
			out = append(out, a.AttemptID)
		}
		return out
	}
	got := pageThrough(t, e, "/v1/attempts?limit=2", attIDs, func(p attemptList) string { return p.NextCursor })
	if !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v", got, want)
	}
	// The documents' limits are snake_case, listed and alone.
	const snake = `"limits":{"memory_bytes":65536,"timeout_ms":100}`
	if r := e.get("/v1/attempts?limit=1"); !strings.Contains(string(r.body), snake) {
		t.Fatalf("list: %s", r.body)
	}
	if r := e.get("/v1/attempts/" + want[0]); !strings.Contains(string(r.body), snake) {
		t.Fatalf("get: %s", r.body)
	}
}

// GET /v1/events takes cursor and answers next_cursor; after and
// next_after stay as deprecated aliases with the same meaning.
func TestEventsCursorAndAlias(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	e.enqueue(helloIntent)
	e.enqueue(helloIntent)
	first := decode[eventPage](t, e.get("/v1/events?limit=1"))
	if first.NextCursor != fmt.Sprint(first.NextAfter) || first.NextAfter != first.Events[0].Seq {
		t.Fatalf("first page: %+v", first)
	}
	byCursor := decode[eventPage](t, e.get("/v1/events?limit=1&cursor="+first.NextCursor))
	byAfter := decode[eventPage](t, e.get("/v1/events?limit=1&after="+first.NextCursor))
	if len(byCursor.Events) != 1 || byCursor.Events[0].Seq <= first.NextAfter || byCursor.Events[0].Seq != byAfter.Events[0].Seq {
		t.Fatalf("by cursor %+v, by after %+v", byCursor, byAfter)
	}
}
