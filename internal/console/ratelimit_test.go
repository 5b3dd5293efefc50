package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/replay"
)

// replayCounter counts the replays it runs.
type replayCounter struct {
	*fakeBackend
	n atomic.Int32
}

func (b *replayCounter) Replay(ctx context.Context, tenant, id string) (*replay.Verdict, error) {
	b.n.Add(1)
	return b.fakeBackend.Replay(ctx, tenant, id)
}

// The console spends a token's requests from the limiter it shares with
// the API: over it, every page, button and login is a 429 page with
// Retry-After, and the Replay button runs nothing; another token is not
// slowed.
func TestRateLimit(t *testing.T) {
	lim := auth.NewLimiter(0.001, 2) // two at once, then one per 1000 s
	b := &replayCounter{fakeBackend: newFake()}
	mux := http.NewServeMux()
	mux.Handle(Prefix, New(Config{Backend: b, Authenticate: authenticate, Limiter: lim}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	if ok, _ := lim.Take(tokens["tok-all"]); !ok { // the API spent one
		t.Fatal("the first request was refused")
	}
	if resp, body := do(t, srv, req{path: "/console/tasks", token: "tok-all"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("within the burst: %d\n%s", resp.StatusCode, body)
	}
	form := url.Values{"csrf": {csrf("tok-all")}}
	for _, r := range []req{
		{path: "/console/tasks", token: "tok-all"},
		{path: "/console/attempts/att-acme-1", token: "tok-all"},
		{method: "POST", path: "/console/attempts/att-acme-1/replay", token: "tok-all", form: form},
		{method: "POST", path: "/console/tasks/task-acme-1/cancel", token: "tok-all", form: form},
		{path: "/console/", token: "tok-all"},
		{method: "POST", path: "/console/login", form: url.Values{"token": {"tok-all"}}},
	} {
		resp, body := do(t, srv, r)
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || retry < 1 ||
			!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "429 Too Many Requests") || !strings.Contains(body, "over its rate of 0.001 requests a second") {
			t.Errorf("%s %s over the rate: %d Retry-After %q\n%s", r.method, r.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		for _, c := range resp.Cookies() {
			if c.Name == CookieName && c.Value != "" {
				t.Errorf("%s %s over the rate set the cookie", r.method, r.path)
			}
		}
	}
	if n := b.n.Load(); n != 0 {
		t.Errorf("%d replays ran over the rate", n)
	}
	if len(b.canceled) != 0 {
		t.Errorf("canceled %v over the rate", b.canceled)
	}
	if resp, body := do(t, srv, req{path: "/console/tasks", token: "tok-read"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("another token: %d\n%s", resp.StatusCode, body)
	}
}
