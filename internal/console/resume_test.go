package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// resumeBackend also resumes, keeping the values and who asked.
type resumeBackend struct {
	*fakeBackend
	values []string
	by     []string
}

func (b *resumeBackend) ResumeTask(ctx context.Context, tenant, id string, value json.RawMessage) (*host.TaskRecord, error) {
	t, err := b.Task(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	b.values = append(b.values, string(value))
	b.by = append(b.by, auth.From(ctx).TokenID)
	return t, nil
}

// The Resume form sends its value (empty is null); a value that is not
// JSON is refused before the backend is asked.
func TestResumeForm(t *testing.T) {
	b := &resumeBackend{fakeBackend: newFake()}
	srv := newServer(t, b)
	_, body := do(t, srv, req{path: "/console/tasks/task-acme-3", token: "tok-all"})
	for _, s := range []string{`id="resume"`, `name="value"`} {
		if !strings.Contains(body, s) {
			t.Fatalf("task page lacks %q", s)
		}
	}
	for _, v := range []string{"", ` {"approved":true} `} {
		resp, body := do(t, srv, req{method: "POST", path: "/console/tasks/task-acme-3/resume", token: "tok-all",
			form: url.Values{"csrf": {csrf("tok-all")}, "value": {v}}})
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("resume %q: %d %s", v, resp.StatusCode, body)
		}
	}
	resp, _ := do(t, srv, req{method: "POST", path: "/console/tasks/task-acme-3/resume", token: "tok-all",
		form: url.Values{"csrf": {csrf("tok-all")}, "value": {"{"}}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a value that is not JSON: %d", resp.StatusCode)
	}
	if len(b.values) != 2 || b.values[0] != "null" || b.values[1] != `{"approved":true}` || b.by[0] != "all" {
		t.Fatalf("resumed with %q by %q", b.values, b.by)
	}
}
