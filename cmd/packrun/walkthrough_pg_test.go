package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	packrun "github.com/packrun/packrun"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// The README's serve walkthrough, unchanged, on PostgreSQL: only
// PACKRUN_STORE is set (for the commands run here and for serve).
func TestServeWalkthroughOnPostgres(t *testing.T) {
	t.Setenv(packrun.StoreEnv, pgtest.DSN(t))
	h := exampleHome(t, "hello-c") // installed into PostgreSQL
	token := strings.TrimSpace(lastLine(h.ok("tokens", "create", "--tenant", "acme", "--scopes", "tasks:write,tasks:read,evidence:read")))
	bin := packrunBinary(t)
	s := startServeWith(t, bin, h.home)
	s.waitUp(t)
	base := s.baseURL(t)
	h.ok("tasks", "enqueue", "--type", "hello.c", "--input", `{"name":"Ada"}`, "--priority", "1")
	code, body := get(t, "POST", base+"/v1/tasks", token, `{"task_type":"hello.c","payload":{"name":"Bo"},"priority":2}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/tasks: %d %s", code, body)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		ts := h.tasks()
		done := 0
		for _, tk := range ts {
			if tk.Status == "completed" {
				done++
			}
		}
		if len(ts) == 2 && done == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks after a minute: %+v", ts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := h.ok("attempts", "list"); strings.Count(out, "completed") < 2 {
		t.Fatalf("attempts list:\n%s", out)
	}
	if out := h.ok("events", "--type", "task_finished", "--since", "1h"); strings.Count(out, "task_finished") != 2 {
		t.Fatalf("events:\n%s", out)
	}
	if out := h.ok("evidence", "verify"); !strings.Contains(out, "intact") {
		t.Fatalf("evidence verify:\n%s", out)
	}
	h.ok("memory", "put", "--namespace", "notes", "greeting", `"hi"`, "--ttl", "1h", "--secret")
	if out := h.ok("memory", "list", "--namespace", "notes"); !strings.Contains(out, "greeting") {
		t.Fatalf("memory list:\n%s", out)
	}
	s.Process.Signal(syscall.SIGTERM)
	if err := s.Wait(); err != nil {
		t.Fatalf("serve after SIGTERM: %v", err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
