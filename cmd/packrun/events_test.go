package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// `packrun events` lists the store's events with its filters; bad flags
// are usage errors naming the flag.
func TestEventsCommand(t *testing.T) {
	h := helloHome(t)
	id := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))
	var evs []host.Event
	for _, line := range strings.Split(strings.TrimSpace(h.ok("events", "--json", "--task", id)), "\n") {
		var e host.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		evs = append(evs, e)
	}
	if len(evs) != 1 || evs[0].Type != "task_enqueued" || evs[0].TaskID != id {
		t.Fatalf("events of the task: %+v", evs)
	}
	out := h.ok("events", "--type", "task_enqueued")
	if !strings.HasPrefix(out, "SEQ") || !strings.Contains(out, id) || strings.Count(out, "\n") != 2 {
		t.Fatalf("table:\n%s", out)
	}
	if out := h.ok("events", "--since", "1h", "--limit", "1", "--json"); strings.Count(out, "\n") != 1 {
		t.Fatalf("--limit 1:\n%s", out)
	}
	if out := h.ok("events", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "--json"); out != "" {
		t.Fatalf("--since an hour ahead:\n%s", out)
	}
	for _, c := range []struct{ args, stderr string }{
		{"--since yesterday", `invalid argument "yesterday" for "--since" flag`},
		{"--limit 0", "--limit 0: must be at least 1"},
	} {
		code, _, errs := h.run(append([]string{"events"}, strings.Fields(c.args)...)...)
		if code != 64 || !strings.Contains(errs, c.stderr) {
			t.Errorf("%s: exit %d, %s", c.args, code, errs)
		}
	}
}

// --follow prints events appended after it started, until its context
// ends, and then exits 0.
func TestEventsFollow(t *testing.T) {
	h := helloHome(t)
	first := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))
	defer func(p time.Duration) { followPoll = p }(followPoll)
	followPoll = 5 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		var errb strings.Builder
		done <- run(ctx, []string{"--home", h.home, "events", "--follow", "--json", "--type", "task_enqueued"}, strings.NewReader(""), pw, &errb)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	waitFor := func(id string) {
		t.Helper()
		for lines.Scan() {
			var e host.Event
			if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
				t.Fatalf("%q: %v", lines.Text(), err)
			}
			if e.TaskID == id {
				return
			}
		}
		t.Fatalf("follow ended before task %s's event", id)
	}
	waitFor(first)
	second := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))
	waitFor(second)
	cancel()
	go io.Copy(io.Discard, pr)
	if code := <-done; code != 0 {
		t.Fatalf("follow exited %d", code)
	}
}

// tasks resume and retry: a task in the wrong status is refused (exit 5)
// with the reason; bad flags are usage errors; the control is recorded
// with the operator's name.
func TestTasksResumeRetry(t *testing.T) {
	h := helloHome(t)
	id := strings.TrimSpace(h.ok("tasks", "enqueue", "--type", "hello.c"))
	for _, c := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"tasks", "retry", id}, 5, "task is pending; only a permanent_failure, retryable_failure or blocked task can be retried"},
		{[]string{"tasks", "resume", id, "--value", "1"}, 5, "task is pending; only a blocked task whose node suspended can be resumed"},
		{[]string{"tasks", "resume", id}, 64, "tasks resume needs --value JSON"},
		{[]string{"tasks", "resume", id, "--value", "{"}, 64, "--value: not valid JSON"},
		{[]string{"tasks", "retry", "task_nope"}, 66, "task_nope"},
	} {
		code, _, errs := h.run(c.args...)
		if code != c.code || !strings.Contains(errs, c.stderr) {
			t.Errorf("%v: exit %d, %s", c.args, code, errs)
		}
	}
	h.ok("tasks", "cancel", id)
	if code, _, errs := h.run("tasks", "retry", id); code != 5 || !strings.Contains(errs, "task is operator_canceled") {
		t.Fatalf("retry of a canceled task: %d %s", code, errs)
	}
}
