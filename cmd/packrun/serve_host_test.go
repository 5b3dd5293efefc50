package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/packrun/packrun/host"
)

// `packrun serve` on 127.0.0.1 refuses a request for any other Host (a
// page whose DNS name was rebound to 127.0.0.1) with 421, and a body that
// is not declared JSON with 415, storing nothing; the same requests for
// localhost, as JSON, are served.
func TestServeRefusesForeignHost(t *testing.T) {
	home, bin := servedHome(t)
	s := startServe(t, bin, home)
	s.waitUp(t)
	defer func() {
		s.Process.Signal(syscall.SIGTERM)
		s.Wait()
	}()
	m := regexp.MustCompile(`packrun serving on http://(127\.0\.0\.1:\d+)`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatalf("no 127.0.0.1 address in %q", s.logs.String())
	}
	addr := m[1]
	port := addr[strings.LastIndexByte(addr, ':'):]
	send := func(method, path, hostHeader, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = hostHeader
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	const intent = `{"task_type":"hello.c","payload":{"name":"Ada"}}`
	for _, tc := range []struct {
		method, path, host, contentType, body string
		status                                int
		says                                  string
	}{
		{"GET", "/v1/tasks", "attacker.example" + port, "", "", 421, "DNS rebinding"},
		{"POST", "/v1/tasks", "attacker.example" + port, "application/json", intent, 421, "not a loopback name"},
		{"POST", "/v1/tasks", "localhost" + port, "text/plain", intent, 415, "application/json"},
		{"POST", "/v1/tasks", "localhost" + port, "", intent, 415, "application/json"},
	} {
		if status, body := send(tc.method, tc.path, tc.host, tc.contentType, tc.body); status != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s %s Host %s: %d %s, want %d saying %q", tc.method, tc.path, tc.host, status, body, tc.status, tc.says)
		}
	}
	if list, _ := homeStore(t, home).ListTasks(t.Context(), host.TaskFilter{}); len(list) != 0 {
		t.Fatalf("refused requests stored %d tasks", len(list))
	}
	for _, h := range []string{"localhost" + port, addr, "[::1]" + port} {
		if status, body := send("GET", "/v1/tasks", h, "", ""); status != http.StatusOK {
			t.Errorf("GET Host %s: %d %s", h, status, body)
		}
	}
	if status, body := send("POST", "/v1/tasks", "localhost"+port, "application/json; charset=utf-8", intent); status != http.StatusCreated {
		t.Errorf("enqueue: %d %s", status, body)
	}
}
