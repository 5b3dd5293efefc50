package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// fakeRuns is a RunService holding one run, run_1, whose log and status
// the test writes.
type fakeRuns struct {
	RunService // the methods the stream does not use are left nil

	mu      sync.Mutex
	status  string
	evs     []host.RunEvent
	payload json.RawMessage
	// streams receives the context of every GetRun call: a request's,
	// done once its handler has returned.
	streams chan context.Context
}

func newFakeRuns() *fakeRuns {
	return &fakeRuns{status: host.RunRunning, payload: json.RawMessage(`{}`), streams: make(chan context.Context, 1<<16)}
}

func (f *fakeRuns) GetRun(ctx context.Context, tenant, runID string) (*host.Run, error) {
	if runID != "run_1" {
		return nil, fmt.Errorf("run %s: %w", runID, host.ErrNotFound)
	}
	select {
	case f.streams <- ctx:
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return &host.Run{RunID: runID, Tenant: tenant, Status: f.status}, nil
}

func (f *fakeRuns) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	if runID != "run_1" {
		return nil, fmt.Errorf("run %s: %w", runID, host.ErrNotFound)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evs), nil
}

// add appends events of type typ; status, when not empty, is set in the
// same step (as AdvanceRun does).
func (f *fakeRuns) add(n int, typ, status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range n {
		f.evs = append(f.evs, host.RunEvent{Seq: len(f.evs), Type: typ, RunID: "run_1", Payload: f.payload, Data: f.payload})
	}
	if status != "" {
		f.status = status
	}
}

// sseEvent is one frame read from a stream.
type sseEvent struct {
	id, event, data string
}

// sseStream is an open stream.
type sseStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	// comments counts the comment lines read.
	comments int
}

func openStream(t *testing.T, e *env, path, lastID string) *sseStream {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("GET %s: Content-Type %q, want text/event-stream", path, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &sseStream{resp: resp, sc: sc}
}

// next reads the next event; ok is false when the stream ended (err nil:
// the server closed it cleanly).
func (s *sseStream) next() (ev sseEvent, ok bool, err error) {
	seen := false
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if seen {
				return ev, true, nil
			}
		case strings.HasPrefix(line, ":"):
			s.comments++
		case strings.HasPrefix(line, "id: "):
			ev.id, seen = line[4:], true
		case strings.HasPrefix(line, "event: "):
			ev.event, seen = line[7:], true
		case strings.HasPrefix(line, "data: "):
			ev.data, seen = line[6:], true
		}
	}
	return ev, false, s.sc.Err()
}

// all reads the stream to its end, which must be the server's clean close.
func (s *sseStream) all(t *testing.T) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, ok, err := s.next()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func types(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.event)
	}
	return out
}

func setSSE(t *testing.T, poll, beat, write time.Duration) {
	p, b, w := ssePoll, sseHeartbeat, sseWriteTimeout
	ssePoll, sseHeartbeat, sseWriteTimeout = poll, beat, write
	t.Cleanup(func() { ssePoll, sseHeartbeat, sseWriteTimeout = p, b, w })
}

func sseEnv(t *testing.T) (*env, *fakeRuns) {
	f := newFakeRuns()
	return newEnv(t, newBackend(t), func(c *Config) { c.Runs = f }), f
}

// TestRunEventsSSEModes: each streamMode sends what openwop's
// stream-modes.md maps to it, ids are the events' seqs, and the server
// ends the stream once the run is terminal.
func TestRunEventsSSEModes(t *testing.T) {
	setSSE(t, 5*time.Millisecond, time.Hour, 10*time.Second)
	e, f := sseEnv(t)
	f.add(1, host.RunEventStarted, "")
	f.add(1, "node.started", "")
	f.add(1, "node.completed", "")
	// Opened while the run is running; it completes afterwards.
	s := openStream(t, e, "/v1/runs/run_1/events?streamMode=updates", "")
	first, ok, err := s.next()
	if err != nil || !ok || first.event != host.RunEventStarted || first.id != "0" {
		t.Fatalf("first event %+v ok=%v err=%v, want run.started id 0", first, ok, err)
	}
	f.add(1, host.RunEventCompleted, host.RunCompleted)
	rest := s.all(t)
	got := append([]sseEvent{first}, rest...)
	if want := []string{"run.started", "node.completed", "run.completed"}; !slices.Equal(types(got), want) {
		t.Fatalf("updates: %v, want %v", types(got), want)
	}
	if got[1].id != "2" || got[2].id != "3" {
		t.Fatalf("ids %q %q, want the seqs 2 and 3", got[1].id, got[2].id)
	}
	var ev host.RunEvent
	if err := json.Unmarshal([]byte(got[2].data), &ev); err != nil || ev.Seq != 3 || ev.Type != host.RunEventCompleted {
		t.Fatalf("data %s: %v", got[2].data, err)
	}

	// The run is terminal now: each stream sends and ends.
	debug := openStream(t, e, "/v1/runs/run_1/events?streamMode=debug", "").all(t)
	if want := []string{"run.started", "node.started", "node.completed", "run.completed"}; !slices.Equal(types(debug), want) {
		t.Fatalf("debug: %v, want %v", types(debug), want)
	}
	def := openStream(t, e, "/v1/runs/run_1/events", "").all(t)
	if !slices.Equal(types(def), types(got)) {
		t.Fatalf("no streamMode: %v, want updates' %v", types(def), types(got))
	}
	values := openStream(t, e, "/v1/runs/run_1/events?streamMode=values", "").all(t)
	if len(values) != 1 || values[0].event != "state.snapshot" || values[0].id != "3" {
		t.Fatalf("values: %+v, want one state.snapshot id 3", values)
	}
	var run host.Run
	if err := json.Unmarshal([]byte(values[0].data), &run); err != nil || run.Status != host.RunCompleted || run.RunID != "run_1" {
		t.Fatalf("snapshot %s: %v", values[0].data, err)
	}
	if msgs := openStream(t, e, "/v1/runs/run_1/events?streamMode=messages", "").all(t); len(msgs) != 0 {
		t.Fatalf("messages: %v, want none (no AI node streams)", types(msgs))
	}
	// Resuming after the terminal event sends nothing and ends.
	if after := openStream(t, e, "/v1/runs/run_1/events", "3").all(t); len(after) != 0 {
		t.Fatalf("after Last-Event-ID 3: %v, want nothing", types(after))
	}
	if after := openStream(t, e, "/v1/runs/run_1/events", "1").all(t); !slices.Equal(types(after), []string{"node.completed", "run.completed"}) {
		t.Fatalf("after Last-Event-ID 1: %v", types(after))
	}

	// Other Accept values get the JSON list, as before.
	r := e.get("/v1/runs/run_1/events?streamMode=debug")
	if r.status != http.StatusOK || !strings.Contains(string(r.body), `"events":[`) {
		t.Fatalf("JSON: %d %s", r.status, r.body)
	}
}

// TestRunEventsSSERefusals: a bad streamMode (whatever the Accept), a bad
// Last-Event-ID or an unknown run is refused before any stream starts.
func TestRunEventsSSERefusals(t *testing.T) {
	e, f := sseEnv(t)
	f.add(1, host.RunEventStarted, "")
	bad := e.get("/v1/runs/run_1/events?streamMode=does-not-exist")
	wantOpenwopError(t, bad, http.StatusBadRequest, "validation_error", "streamMode")
	var body struct {
		Details struct {
			Supported []string `json:"supported"`
		} `json:"details"`
	}
	if err := json.Unmarshal(bad.body, &body); err != nil || !slices.Equal(body.Details.Supported, streamModes) {
		t.Fatalf("bad streamMode: details.supported %v (%v), want %v: %s", body.Details.Supported, err, streamModes, bad.body)
	}
	for _, c := range []struct {
		path, lastID string
		status       int
		code, field  string
	}{
		{"/v1/runs/run_1/events?streamMode=does-not-exist", "", 400, "validation_error", "streamMode"},
		{"/v1/runs/run_1/events", "x", 400, "validation_error", "Last-Event-ID"},
		{"/v1/runs/run_1/events", "-2", 400, "validation_error", "Last-Event-ID"},
		{"/v1/runs/run_9/events", "", 404, "not_found", ""},
	} {
		req, _ := http.NewRequest(http.MethodGet, e.url+c.path, nil)
		req.Header.Set("Accept", "text/event-stream")
		if c.lastID != "" {
			req.Header.Set("Last-Event-ID", c.lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		wantOpenwopError(t, resp2(resp, b), c.status, c.code, c.field)
	}
}

func resp2(r *http.Response, b []byte) resp {
	return resp{status: r.StatusCode, body: b, header: r.Header}
}

// TestRunEventsSSEReconnect: a stream of 10,000 events, cut by the client
// part way and resumed with Last-Event-ID while the run goes on, delivers
// every event exactly once.
func TestRunEventsSSEReconnect(t *testing.T) {
	setSSE(t, 2*time.Millisecond, time.Hour, 10*time.Second)
	e, f := sseEnv(t)
	const total = 10_000
	f.add(1, host.RunEventStarted, "")
	f.add(5_999, "node.completed", "")
	seen := map[int]int{}
	take := func(ev sseEvent) int {
		var seq int
		if _, err := fmt.Sscan(ev.id, &seq); err != nil {
			t.Fatalf("id %q: %v", ev.id, err)
		}
		seen[seq]++
		return seq
	}
	s := openStream(t, e, "/v1/runs/run_1/events", "")
	first := <-f.streams
	last := -1
	for range 3_217 {
		ev, ok, err := s.next()
		if !ok || err != nil {
			t.Fatalf("first stream ended early: %v", err)
		}
		last = take(ev)
	}
	s.resp.Body.Close() // the client goes, and its stream ends
	select {
	case <-first.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream of a client that went did not end")
	}
	// The run goes on while the client reconnects.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 39 {
			f.add(100, "node.completed", "")
		}
		f.add(99, "node.completed", "")
		f.add(1, host.RunEventCompleted, host.RunCompleted)
	}()
	for _, ev := range openStream(t, e, "/v1/runs/run_1/events", fmt.Sprint(last)).all(t) {
		take(ev)
	}
	<-done
	if len(seen) != total {
		t.Fatalf("%d distinct events, want %d", len(seen), total)
	}
	for seq := range total {
		if seen[seq] != 1 {
			t.Fatalf("event %d received %d times", seq, seen[seq])
		}
	}
}

// TestRunEventsSSESlowReader: a client that stops reading is cut once a
// round of writes outlasts sseWriteTimeout, and its stream's handler
// ends; the run was never terminal, so only the cut ends it.
func TestRunEventsSSESlowReader(t *testing.T) {
	setSSE(t, 5*time.Millisecond, time.Hour, 200*time.Millisecond)
	e, f := sseEnv(t)
	f.payload = json.RawMessage(`"` + strings.Repeat("x", 4096) + `"`)
	const total = 10_000 // about 80 MB of frames: far beyond the socket's buffers
	f.add(total, "node.completed", "")
	s := openStream(t, e, "/v1/runs/run_1/events", "")
	// The client reads nothing more. Wait for the handler's end: its
	// request context is done then.
	ctx := <-f.streams
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream of a client that does not read was not cut")
	}
	n := 0
	for {
		_, ok, err := s.next()
		if !ok {
			if err == nil {
				t.Fatal("the stream ended cleanly, want it cut")
			}
			break
		}
		n++
	}
	if n >= total {
		t.Fatalf("read %d events of a cut stream, want fewer than %d", n, total)
	}
}

// TestRunEventsSSEHeartbeat: an idle stream gets a comment every
// sseHeartbeat.
func TestRunEventsSSEHeartbeat(t *testing.T) {
	setSSE(t, time.Hour, 5*time.Millisecond, 10*time.Second)
	e, f := sseEnv(t)
	f.add(1, host.RunEventStarted, "")
	s := openStream(t, e, "/v1/runs/run_1/events", "")
	if ev, ok, err := s.next(); !ok || err != nil || ev.event != host.RunEventStarted {
		t.Fatalf("first event %+v: %v", ev, err)
	}
	// Read lines until two heartbeats came (the opening comment is one
	// comment too).
	for s.comments < 3 && s.sc.Scan() {
		if strings.HasPrefix(s.sc.Text(), ": heartbeat") {
			s.comments++
		}
	}
	if s.comments < 3 {
		t.Fatalf("stream ended after %d comments: %v", s.comments, s.sc.Err())
	}
}

// FuzzSSERequestHeaders: the stream's request headers (Last-Event-ID,
// Accept) and ?streamMode= never panic; a Last-Event-ID is taken only as
// a seq >= 0 that reads back as itself, a refusal names the header.
func FuzzSSERequestHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"", "", ""}, {"0", "text/event-stream", "updates"}, {"42", "application/json, text/event-stream;q=0.9", "debug"},
		{"-1", "*/*", "values"}, {"x", "TEXT/EVENT-STREAM", "nope"}, {"99999999999999999999", ",,;", "messages"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, id, accept, mode string) {
		r, err := http.NewRequest(http.MethodGet, "http://x/v1/runs/r/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Last-Event-ID", id)
		r.Header.Set("Accept", accept)
		r.URL.RawQuery = "streamMode=" + url.QueryEscape(mode)
		n, err := lastEventID(r)
		switch {
		case err != nil:
			if !strings.Contains(err.Error(), "Last-Event-ID") {
				t.Fatalf("refusal %q does not name the header", err)
			}
		case strings.TrimSpace(id) == "":
			if n != -1 {
				t.Fatalf("no Last-Event-ID read as %d", n)
			}
		case n < 0 || strconv.Itoa(n) != strings.TrimLeft(strings.TrimSpace(id), "+0") && n != 0:
			t.Fatalf("Last-Event-ID %q read as %d", id, n)
		}
		_ = wantsEventStream(r)
		if m, err := streamMode(r); err == nil && !slices.Contains(streamModes, m) {
			t.Fatalf("streamMode %q taken as %q", mode, m)
		} else if err != nil && !strings.Contains(err.Error(), "streamMode") {
			t.Fatalf("refusal %q does not name streamMode", err)
		}
	})
}
