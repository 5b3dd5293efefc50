package adapters

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// writeScript writes an executable /bin/sh script and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// newRegistry returns a registry over adapters and its evidence directory.
func newRegistry(t *testing.T, adapters ...AdapterConfig) (*Registry, string) {
	t.Helper()
	ev := filepath.Join(t.TempDir(), "adapter-runs")
	r, err := NewRegistry(&Config{Adapters: adapters}, ev)
	if err != nil {
		t.Fatal(err)
	}
	return r, ev
}

func script(id, command string, timeoutMS int64) AdapterConfig {
	return AdapterConfig{AdapterID: id, Kind: KindScript, Command: command, TimeoutMS: timeoutMS}
}

func req(attempt, input string) Request {
	return Request{Input: json.RawMessage(input), TaskID: "task-1", AttemptID: attempt}
}

// callKeys is the evidence record's shape: its keys, sorted.
func callKeys(t *testing.T, c *Call) []string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonEq(a, b []byte) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// eventually polls cond for up to 5s.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}
