package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A client that half-closes its side of the connection after sending a
// request (TCP CloseWrite, as nc -N and some proxies do) still waits for
// the answer: the request is served whole, every time, and what it
// stores matches what was answered. net/http cancels the request's
// context on that EOF; the API must not turn that into a 500.
func TestHalfClosedClient(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	addr := strings.TrimPrefix(e.url, "http://")
	send := func(method, path, body string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, path, addr)
		if body != "" {
			req += fmt.Sprintf("Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
		}
		if _, err := io.WriteString(c, req+"\r\n"+body); err != nil {
			t.Fatal(err)
		}
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s %s: no answer: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	const n = 40
	created := 0
	for i := range n {
		code, body := send("POST", "/v1/tasks", fmt.Sprintf(`{"task_type":%q,"payload":{"name":"h%d"}}`, helloTaskType, i))
		if code != http.StatusCreated {
			t.Errorf("POST /v1/tasks %d: %d %s", i, code, body)
			continue
		}
		created++
		if code, body := send("GET", "/v1/tasks?limit=1", ""); code != http.StatusOK {
			t.Errorf("GET /v1/tasks %d: %d %s", i, code, body)
		}
	}
	if got := len(e.listTasks("?limit=1000")); got != created || created != n {
		t.Fatalf("%d tasks stored, %d answered 201, of %d sent", got, created, n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.logs) != 0 {
		t.Fatalf("logged: %q", e.logs)
	}
}
