package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/packrun/packrun"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/console"
	"github.com/packrun/packrun/internal/message"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// The Messages pages as packrun serve mounts them, over a real home: a
// crisis message delivered to a subscriber and a seed 000 envelope; the
// list filters by topic and pages by cursor; a message's page shows its
// deliveries and its document in another format with what that format
// loses; another tenant's message is not found; a token without
// messages:read is refused.
func TestMessagesPages(t *testing.T) {
	ctx := context.Background()
	h, err := packrun.Open(ctx, filepath.Join(t.TempDir(), "home"), packrun.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(ctx)
	st, tt := h.Store(), host.SubscriberTaskType("watcher")
	if err := st.SetPackTaskTypes(ctx, "local.watch", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: tt}, Pack: "local.watch", Node: "watcher"}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPackSubscriptions(ctx, "local.watch", []host.Subscription{{Pack: "local.watch", Node: "watcher", TaskType: tt, Topics: []string{"crisis.*"}}}); err != nil {
		t.Fatal(err)
	}
	const crisisID = "550e8400-e29b-41d4-a716-446655440009"
	crisis, err := h.PublishMessage(ctx, defaultTenant, "", "application/json; profile=bus-envelope", messagetest.Crisis(crisisID, "sensor.a"))
	if err != nil || len(crisis.Message.Deliveries) != 1 {
		t.Fatalf("publish crisis: %+v %v", crisis, err)
	}
	envID := messagetest.ULID(3)
	if _, err := h.PublishMessage(ctx, defaultTenant, "", "application/json; profile=agent-envelope", messagetest.Envelope(3, "arc", "query", messagetest.ZeroHash)); err != nil {
		t.Fatal(err)
	}
	r, err := message.ParseRequest("application/json; profile=bus-envelope", messagetest.Crisis(messagetest.BusID(4), "sensor.other"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := message.Accept(ctx, st, r, message.Options{Tenant: "other", Origin: "api"}); err != nil {
		t.Fatal(err)
	}

	token := func(scopes ...packrun.Scope) string {
		tok, _, err := h.CreateToken(ctx, packrun.TokenSpec{Tenant: defaultTenant, Name: "operator", Scopes: scopes})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	reader, tasksOnly := token(auth.ScopeMessagesRead), token(auth.ScopeTasksRead)
	handler, err := h.Handler(ctx, packrun.HandlerOptions{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	get := func(tok, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: tok})
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	page := func(path string, has, not []string) {
		t.Helper()
		code, body := get(reader, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, body)
		}
		for _, s := range has {
			if !strings.Contains(body, s) {
				t.Errorf("%s lacks %q:\n%s", path, s, body)
			}
		}
		for _, s := range not {
			if strings.Contains(body, s) {
				t.Errorf("%s has %q", path, s)
			}
		}
	}

	page("/console/messages", []string{`href="/console/messages" aria-current="page">Messages`, crisisID, envID, "crisis.detection"}, []string{messagetest.BusID(4), `id="next"`})
	page("/console/messages?topic=crisis.*", []string{crisisID}, []string{envID})
	page("/console/messages?limit=1", []string{crisisID, `id="next" href="/console/messages?after=` + strconv.FormatInt(crisis.Message.Seq, 10) + `&amp;limit=1"`}, []string{envID})
	page("/console/messages?after="+strconv.FormatInt(crisis.Message.Seq, 10), []string{envID}, []string{crisisID})
	page("/console/messages/"+crisisID, []string{`id="deliveries"`, "watcher", `href="/console/tasks/` + crisis.Message.Deliveries[0].TaskID + `"`,
		`id="document"`, "&#34;message_id&#34;: &#34;" + crisisID}, []string{`id="lost"`})
	page("/console/messages/"+envID+"?format=agent-message", []string{`id="lost"`, "<code>prev_truth_state</code>", `<option value="agent-message" selected>`, "&#34;type&#34;: &#34;query&#34;"}, nil)
	page("/console/messages/"+crisisID+"?format=agent-message", []string{`id="document"`, `id="lost"`, "metadata.message_type (crisis.detection written as type event)"}, []string{`id="render-error"`})

	if code, body := get(reader, "/console/messages/"+messagetest.BusID(4)); code != http.StatusNotFound {
		t.Errorf("another tenant's message: %d\n%s", code, body)
	}
	if code, _ := get(reader, "/console/messages?after=x"); code != http.StatusBadRequest {
		t.Errorf("bad cursor: %d", code)
	}
	if code, body := get(tasksOnly, "/console/messages"); code != http.StatusForbidden || !strings.Contains(body, "messages:read") {
		t.Errorf("without messages:read: %d\n%s", code, body)
	}
}
