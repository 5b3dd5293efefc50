package adapters

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func readDirNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	if os.IsNotExist(err) {
		err = nil
	}
	return names, err
}

// TestGrants proves refused adapters never run: the script would create a file.
func TestGrants(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	s := writeScript(t, t.TempDir(), "touch.sh", `touch `+marker)
	r, ev := newRegistry(t, script("touch", s, 5000))

	tests := []struct {
		name    string
		granted []string
		adapter string
		want    error
	}{
		{"nil grant", nil, "touch", ErrNotGranted},
		{"other adapter granted", []string{"other"}, "touch", ErrNotGranted},
		{"prefix is not a grant", []string{"tou"}, "touch", ErrNotGranted},
		{"unknown and not granted", []string{"touch"}, "ghost", ErrNotGranted},
		{"granted but unknown", []string{"ghost"}, "ghost", ErrUnknownAdapter},
		{"bad attempt id", []string{"touch"}, "touch", ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rq := req("a1", `"x"`)
			if tt.want == ErrInvalidRequest {
				rq.AttemptID = "../escape"
			}
			call, err := r.Invoke(context.Background(), tt.granted, tt.adapter, rq)
			if call != nil || !errors.Is(err, tt.want) {
				t.Fatalf("call %v, err %v; want %v", call, err, tt.want)
			}
			var ie *InvokeError
			if !errors.As(err, &ie) || ie.AdapterID != tt.adapter {
				t.Errorf("err %v is not an *InvokeError naming %s", err, tt.adapter)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatal("the adapter ran")
			}
			if names, _ := readDirNames(ev); len(names) != 0 {
				t.Errorf("evidence written: %v", names)
			}
		})
	}
	// Positive control: granted, it runs.
	if _, err := r.Invoke(context.Background(), []string{"other", "touch"}, "touch", req("a1", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("granted adapter did not run")
	}
}

// TestSameShape checks every kind and outcome produces a record with the
// same keys.
func TestSameShape(t *testing.T) {
	fake := &fakeOllama{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	bin := t.TempDir()
	ok := writeScript(t, bin, "ok.sh", `cat`)
	fail := writeScript(t, bin, "fail.sh", `exit 1`)
	slow := writeScript(t, bin, "slow.sh", `sleep 60`)
	harness := AdapterConfig{AdapterID: "claude", Kind: KindClaudeCode, Command: ok, TimeoutMS: 5000,
		Autonomy: &Autonomy{Profile: ProfileRestricted}}
	unsettled := AdapterConfig{AdapterID: "unsettled", Kind: KindClaudeCode, Command: ok, TimeoutMS: 5000, WorkingDir: bin,
		Autonomy: &Autonomy{Profile: ProfileRestricted, RequiredSettingsFiles: []string{"absent.json"}}}
	r, _ := newRegistry(t,
		script("ok", ok, 5000), script("fail", fail, 5000), script("slow", slow, 200), harness, unsettled,
		ollama("llm", srv.URL, "llama3.2", 5000), ollama("broken", srv.URL, "broken", 5000), ollama("slow-llm", srv.URL, "slow", 200),
	)
	want := []string{"adapter_id", "adapter_kind", "argv", "attempt_id", "autonomy_profile", "duration_ms", "ended_at",
		"endpoint", "error", "exit_code", "exit_status", "http_status", "model", "request", "response", "sandbox", "seq",
		"started_at", "stderr_bytes", "stderr_path", "stderr_truncated", "stdout_bytes", "stdout_path", "stdout_truncated", "task_id"}
	for _, id := range r.IDs() {
		call, _ := r.Invoke(context.Background(), r.IDs(), id, req("shape", `"x"`))
		if call == nil {
			t.Fatalf("%s: no call record", id)
		}
		if got := callKeys(t, call); !reflect.DeepEqual(got, want) {
			t.Errorf("%s (%s): keys %v, want %v", id, call.ExitStatus, got, want)
		}
		for _, p := range []string{call.StdoutPath, call.StderrPath} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: evidence file: %v", id, err)
			}
		}
	}
}

func TestNewRegistryValidates(t *testing.T) {
	bad := &Config{Adapters: []AdapterConfig{
		{AdapterID: "o", Kind: KindOllamaGenerate, Endpoint: "http://127.0.0.1:11434", Model: "m", TimeoutMS: 1, Command: "sh"},
		{AdapterID: "h", Kind: KindCodex, Command: "codex", TimeoutMS: 1},
	}}
	_, err := NewRegistry(bad, t.TempDir())
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
	want := []Problem{
		{"$.adapters[0].command", "not allowed for kind ollama-generate"},
		{"$.adapters[1].autonomy", `required for kind codex: declare autonomy.profile "restricted" or "trusted-vm"`},
	}
	if !reflect.DeepEqual(ce.Problems, want) {
		t.Errorf("problems = %v, want %v", ce.Problems, want)
	}
	if _, err := NewRegistry(&Config{}, ""); err == nil {
		t.Error("no evidence directory accepted")
	}
}

// The registry keeps its own copy of the config.
func TestRegistryCopiesConfig(t *testing.T) {
	cfg := &Config{Adapters: []AdapterConfig{{AdapterID: "s", Kind: KindScript, Command: "/bin/true", TimeoutMS: 1000,
		ExtraArgs: []string{"a"}}}}
	r, err := NewRegistry(cfg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Adapters[0].ExtraArgs[0] = "changed"
	a, _ := r.Adapter("s")
	a.ExtraArgs[0] = "changed too"
	if b, _ := r.Adapter("s"); b.ExtraArgs[0] != "a" {
		t.Errorf("registry config changed to %v", b.ExtraArgs)
	}
}
