package adapters

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const validConfig = `{"adapters": [
  {"adapter_id": "summarise", "kind": "script", "command": "bin/summarise", "working_dir": "work",
   "timeout_ms": 30000, "env_file": "secrets.env", "env": {"MODE": "fast"}, "extra_args": ["--json"],
   "autonomy": {"profile": "runtime-native"}},
  {"adapter_id": "local-llm", "kind": "ollama-generate", "endpoint": "http://127.0.0.1:11434", "model": "llama3.2", "timeout_ms": 60000},
  {"adapter_id": "claude", "kind": "claude-code", "command": "claude", "working_dir": "/srv/repo", "timeout_ms": 1800000,
   "sandbox": "workspace-write", "model": "claude-sonnet-4",
   "autonomy": {"profile": "trusted-vm", "required_args": ["--dangerously-skip-permissions"],
                "required_settings_files": [".claude/settings.json", "/etc/claude/managed.json"]},
   "extra_args": ["-p", "--output-format", "json"]},
  {"adapter_id": "codex", "kind": "codex", "command": "codex", "timeout_ms": 1800000, "sandbox": "read-only", "model": "gpt-5-codex",
   "provider": {"id": "openai", "name": "OpenAI", "base_url": "https://api.openai.com/v1", "wire_api": "responses", "requires_openai_auth": true},
   "autonomy": {"profile": "restricted", "required_args": ["exec"]}},
  {"adapter_id": "hermes", "kind": "hermes-agent", "command": "hermes", "timeout_ms": 600000, "autonomy": {"profile": "restricted"}}
]}`

func TestDecodeConfig(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []Problem // nil: valid
	}{
		{name: "valid, every kind", json: validConfig},
		{name: "empty object", json: `{}`},
		{name: "empty list", json: `{"adapters": []}`},
		{name: "several problems at once", json: `{"adapters": [
			{"adapter_id": "a", "kind": "script", "command": "run.sh", "timeout_ms": 1000},
			{"adapter_id": "a", "kind": "script", "command": "", "timeout_ms": 0},
			{"adapter_id": "bad id!", "kind": "gpt-agent", "timeout_ms": 5},
			{"adapter_id": "d", "kind": "codex", "command": "codex", "timeout_ms": 10, "extra_args": ["--yolo"]},
			{"adapter_id": "e", "kind": "ollama-generate", "endpoint": "ftp://x", "timeout_ms": 10, "command": "x", "colour": "red"}
		]}`, want: []Problem{
			{"$.adapters[4].command", "not allowed for kind ollama-generate"},
			{"$.adapters[4].colour", "unknown field"},
			{"$.adapters[1].timeout_ms", "must be positive"},
			{"$.adapters[1].command", "required"},
			{"$.adapters[1].adapter_id", `duplicate adapter_id "a" (also at $.adapters[0])`},
			{"$.adapters[2].adapter_id", `"bad id!" is not an adapter id: use letters, digits, '_' and '-', in '.'-separated segments`},
			{"$.adapters[2].kind", `unknown kind "gpt-agent": one of script, ollama-generate, claude-code, codex, hermes-agent`},
			{"$.adapters[3].extra_args[0]", `"--yolo" switches the harness's safeguards off: declare it in autonomy.required_args with autonomy.profile "trusted-vm" instead`},
			{"$.adapters[3].autonomy", `required for kind codex: declare autonomy.profile "restricted" or "trusted-vm"`},
			{"$.adapters[4].endpoint", `"ftp://x": must be an http or https URL`},
			{"$.adapters[4].model", "required for kind ollama-generate"},
		}},
		{name: "not JSON", json: `{"adapters": [`, want: []Problem{{"$", "not valid JSON: unexpected EOF"}}},
		{name: "trailing data", json: `{} {}`, want: []Problem{{"$", "not valid JSON: data after the top-level value"}}},
		{name: "not an object", json: `[]`, want: []Problem{{"$", `must be an object {"adapters": [...]}`}}},
		{name: "top level", json: `{"adapters": {}, "version": 1}`, want: []Problem{
			{"$.version", "unknown field"}, {"$.adapters", "must be an array"}}},
		{name: "duplicate key", json: `{"adapters": [{"adapter_id": "a", "kind": "script", "command": "x", "command": "y", "timeout_ms": 1}]}`,
			want: []Problem{{"$.adapters[0].command", "duplicate key"}}},
		{name: "types", json: `{"adapters": [{"adapter_id": 7, "kind": "script", "command": "x", "timeout_ms": "1000",
			"env": {"A": 1, "B C": "x"}, "extra_args": "-v", "working_dir": ""}, "nope"]}`, want: []Problem{
			{"$.adapters[0].adapter_id", "must be a string"},
			{"$.adapters[0].timeout_ms", "must be a number"},
			{"$.adapters[0].env.A", "must be a string"},
			{"$.adapters[0].extra_args", "must be an array of strings"},
			{"$.adapters[0].working_dir", "must not be empty (leave the field out)"},
			{"$.adapters[1]", "must be an object"},
			{`$.adapters[0].env["B C"]`, "not an environment variable name (letters, digits, '_', not starting with a digit)"},
		}},
		{name: "timeouts", json: `{"adapters": [
			{"adapter_id": "a", "kind": "script", "command": "x", "timeout_ms": 1.5},
			{"adapter_id": "b", "kind": "script", "command": "x", "timeout_ms": 1e3},
			{"adapter_id": "c", "kind": "script", "command": "x", "timeout_ms": 86400001},
			{"adapter_id": "d", "kind": "script", "command": "x"}]}`, want: []Problem{
			{"$.adapters[0].timeout_ms", "must be an integer"},
			{"$.adapters[2].timeout_ms", "must be at most 86400000 (24 hours)"},
			{"$.adapters[3].timeout_ms", "must be positive"},
		}},
		{name: "harness autonomy", json: `{"adapters": [
			{"adapter_id": "a", "kind": "claude-code", "command": "claude", "timeout_ms": 1, "autonomy": {}},
			{"adapter_id": "b", "kind": "hermes-agent", "command": "hermes", "timeout_ms": 1, "autonomy": {"profile": "runtime-native"}},
			{"adapter_id": "c", "kind": "claude-code", "command": "claude", "timeout_ms": 1, "sandbox": "danger-full-access",
			 "autonomy": {"profile": "restricted", "required_args": ["--permission-mode", "bypassPermissions"]}},
			{"adapter_id": "d", "kind": "codex", "command": "codex", "timeout_ms": 1, "sandbox": "everything",
			 "autonomy": {"profile": "trusted-vm", "required_settings_files": ["x.json"], "level": 3}},
			{"adapter_id": "e", "kind": "claude-code", "command": "claude", "timeout_ms": 1,
			 "autonomy": {"profile": "trusted-vm", "required_settings_files": ["rel.json"]}},
			{"adapter_id": "f", "kind": "codex", "command": "codex", "timeout_ms": 1, "autonomy": {"profile": "restricted"},
			 "provider": {"name": "x", "wire_api": "chat", "base_url": "https://user:pw@host/v1"}}]}`, want: []Problem{
			{"$.adapters[3].autonomy.level", "unknown field"},
			{"$.adapters[0].autonomy.profile", `required: "restricted" or "trusted-vm"`},
			{"$.adapters[1].autonomy.profile", `must be "restricted" or "trusted-vm" for kind hermes-agent`},
			{"$.adapters[2].sandbox", `danger-full-access needs autonomy.profile "trusted-vm"`},
			{"$.adapters[2].autonomy.required_args[1]", `"bypassPermissions" switches the harness's safeguards off, but autonomy.profile is "restricted"`},
			{"$.adapters[3].sandbox", `unknown sandbox "everything": one of read-only, workspace-write, danger-full-access`},
			{"$.adapters[3].autonomy.required_settings_files", "not allowed for kind codex"},
			{"$.adapters[4].autonomy.required_settings_files[0]", "a relative path needs working_dir (it is relative to it)"},
			{"$.adapters[5].provider.id", "required"},
			{"$.adapters[5].provider.wire_api", `must be "responses"`},
			{"$.adapters[5].provider.base_url", "credentials in the URL are not allowed (they would be recorded as evidence)"},
		}},
		{name: "script and ollama fields", json: `{"adapters": [
			{"adapter_id": "a", "kind": "script", "command": "x", "timeout_ms": 1, "model": "m", "sandbox": "read-only",
			 "autonomy": {"profile": "trusted-vm", "required_args": ["-x"]}},
			{"adapter_id": "b", "kind": "script", "command": "~/bin/x", "working_dir": "~/w", "timeout_ms": 1},
			{"adapter_id": "c", "kind": "ollama-generate", "endpoint": "http://h:1/?q=1", "model": "m", "timeout_ms": 1, "autonomy": {"profile": "restricted"}}]}`,
			want: []Problem{
				{"$.adapters[0].model", "not allowed for kind script"},
				{"$.adapters[0].sandbox", "not allowed for kind script"},
				{"$.adapters[2].autonomy", "not allowed for kind ollama-generate"},
				{"$.adapters[0].autonomy.profile", `must be "runtime-native" for kind script`},
				{"$.adapters[0].autonomy.required_args", "not allowed for kind script"},
				{"$.adapters[1].command", `"~/bin/x": '~' is not expanded; use an absolute path`},
				{"$.adapters[1].working_dir", `"~/w": '~' is not expanded; use an absolute path`},
				{"$.adapters[2].endpoint", `"http://h:1/?q=1": must not have a query or fragment`},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := DecodeConfig([]byte(tt.json))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if err := cfg.Validate(); err != nil {
					t.Fatalf("decoded config does not validate: %v", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if !reflect.DeepEqual(ce.Problems, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", list(ce.Problems), list(tt.want))
			}
		})
	}
}

func list(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString("\t" + p.String() + "\n")
	}
	return b.String()
}

func TestDecodeValidConfigFields(t *testing.T) {
	cfg, err := DecodeConfig([]byte(validConfig))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Adapters[3]
	if c.Provider == nil || c.Provider.RequiresOpenAIAuth == nil || !*c.Provider.RequiresOpenAIAuth || c.Provider.WireAPI != "responses" {
		t.Errorf("provider = %+v", c.Provider)
	}
	s := cfg.Adapters[0]
	if s.TimeoutMS != 30000 || s.Env["MODE"] != "fast" || s.Autonomy.Profile != ProfileRuntimeNative || s.ExtraArgs[0] != "--json" {
		t.Errorf("script = %+v", s)
	}
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ConfigFileName)

	cfg, err := LoadConfig(path)
	if err != nil || len(cfg.Adapters) != 0 {
		t.Fatalf("missing file: %v, %v", cfg, err)
	}

	if err := os.WriteFile(path, []byte(validConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Adapters[0]
	if s.Command != filepath.Join(home, "bin/summarise") || s.WorkingDir != filepath.Join(home, "work") || s.EnvFile != filepath.Join(home, "secrets.env") {
		t.Errorf("relative paths not resolved against %s: %+v", home, s)
	}
	if c := cfg.Adapters[2]; c.Command != "claude" || c.Autonomy.RequiredSettingsFiles[0] != ".claude/settings.json" {
		t.Errorf("a PATH command or a settings file was rewritten: %+v", c)
	}

	if err := os.WriteFile(path, []byte(`{"adapters": [{"adapter_id": "a", "kind": "script", "command": "x", "timeout_ms": 1},
		{"adapter_id": "b", "kind": "script", "command": "x", "timeout_ms": -5}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(path)
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != "invalid "+path+": $.adapters[1].timeout_ms: must be positive" {
		t.Errorf("err = %v", err)
	}

	big := `{"adapters": [], "pad": "` + strings.Repeat("x", MaxConfigBytes) + `"}`
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(path)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Problems[0].Path != "$" || !strings.Contains(err.Error(), "bytes allowed") {
		t.Errorf("oversized file: %v", err)
	}

	if _, err := LoadConfig(home); err == nil || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("directory as config: %v", err)
	}
}

// FuzzDecodeConfig: DecodeConfig never panics, and what it accepts validates.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(validConfig))
	f.Add([]byte(`{"adapters": [{"adapter_id": "a", "kind": "codex", "autonomy": {"profile": 1}}]}`))
	f.Add([]byte(`{"adapters": [[[[{}]]]], "a": {"a": {"a": null}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := DecodeConfig(b)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
	})
}
