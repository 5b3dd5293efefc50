package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestScript(t *testing.T) {
	bin := t.TempDir()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "vars.env"), []byte("# comment\n\nexport FROM_FILE='from file'\nFROM_ENV=overridden\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	upper := writeScript(t, bin, "upper.sh", `tr a-z A-Z; echo "note on stderr" >&2`)
	fail := writeScript(t, bin, "fail.sh", `echo partial; echo "boom: bad input" >&2; exit 3`)
	env := writeScript(t, bin, "env.sh", `printf '%s|%s|%s|%s' "${PACKRUN_TEST_LEAK-unset}" "${HOME-unset}" "$FROM_ENV" "$FROM_FILE"`)
	pwd := writeScript(t, bin, "pwd.sh", `pwd`)
	text := writeScript(t, bin, "text.sh", `echo "plain text"`)
	silent := writeScript(t, bin, "silent.sh", `cat >/dev/null`)
	t.Setenv("PACKRUN_TEST_LEAK", "host secret")

	withEnv := script("env", env, 5000)
	withEnv.Env = map[string]string{"FROM_ENV": "from env"}
	withEnv.EnvFile = filepath.Join(bin, "vars.env")
	inWork := script("pwd", pwd, 5000)
	inWork.WorkingDir = work
	native := script("upper-native", upper, 5000)
	native.Autonomy = &Autonomy{Profile: ProfileRuntimeNative}
	onPath := script("on-path", "sh", 5000)
	onPath.ExtraArgs = []string{"-c", `echo "[1, 2]"`}

	r, ev := newRegistry(t,
		script("upper", upper, 5000), script("fail", fail, 5000), withEnv, inWork, native,
		script("text", text, 5000), script("silent", silent, 5000), onPath,
		script("missing", filepath.Join(bin, "nope.sh"), 5000),
	)
	realWork, _ := filepath.EvalSymlinks(work)

	tests := []struct {
		name, adapter, input string
		status               ExitStatus
		sentinel             error
		response             string // JSON; "" means null
		exitCode             *int
		stderr               string // substring of the stderr file
		errText              string // substring of Call.Error
	}{
		{name: "string input is raw stdin, text output is a string", adapter: "upper", input: `"hello"`,
			status: StatusOK, response: `"HELLO"`, exitCode: intp(0), stderr: "note on stderr"},
		{name: "JSON input and JSON output", adapter: "upper", input: `{"greeting": "hi"}`,
			status: StatusOK, response: `{"GREETING":"HI"}`, exitCode: intp(0)},
		{name: "runtime-native script", adapter: "upper-native", input: `"x"`, status: StatusOK, response: `"X"`, exitCode: intp(0)},
		{name: "non-zero exit", adapter: "fail", input: `{}`, status: StatusError, sentinel: ErrFailed,
			response: `"partial\n"`, exitCode: intp(3), stderr: "boom: bad input", errText: "exit status 3: boom: bad input"},
		{name: "only configured env and PATH", adapter: "env", status: StatusOK, exitCode: intp(0),
			response: `"unset|unset|from env|from file"`},
		{name: "working_dir honoured", adapter: "pwd", status: StatusOK, exitCode: intp(0),
			response: strconv.Quote(realWork + "\n")},
		{name: "text with a newline stays text", adapter: "text", status: StatusOK, exitCode: intp(0), response: `"plain text\n"`},
		{name: "no output is null", adapter: "silent", input: `"ignored"`, status: StatusOK, exitCode: intp(0)},
		{name: "command looked up on PATH, JSON array output", adapter: "on-path", status: StatusOK, exitCode: intp(0), response: `[1,2]`},
		{name: "command that does not exist", adapter: "missing", status: StatusError, sentinel: ErrFailed, errText: "start"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attempt := "att-" + strconv.Itoa(i)
			call, err := r.Invoke(context.Background(), []string{tt.adapter}, tt.adapter, req(attempt, tt.input))
			if call == nil {
				t.Fatalf("no call record: %v", err)
			}
			if call.ExitStatus != tt.status {
				t.Fatalf("exit_status = %s, want %s (error %q)", call.ExitStatus, tt.status, call.Error)
			}
			if tt.sentinel == nil && err != nil || tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			var ie *InvokeError
			if err != nil && (!errors.As(err, &ie) || ie.AdapterID != tt.adapter) {
				t.Errorf("err %v is not an *InvokeError naming %s", err, tt.adapter)
			}
			if tt.response == "" && call.Response != nil || tt.response != "" && !jsonEq(call.Response, []byte(tt.response)) {
				t.Errorf("response = %s, want %s", call.Response, tt.response)
			}
			if (call.ExitCode == nil) != (tt.exitCode == nil) || call.ExitCode != nil && *call.ExitCode != *tt.exitCode {
				t.Errorf("exit_code = %v, want %v", deref(call.ExitCode), deref(tt.exitCode))
			}
			if !strings.Contains(readFile(t, call.StderrPath), tt.stderr) {
				t.Errorf("stderr file = %q, want it to contain %q", readFile(t, call.StderrPath), tt.stderr)
			}
			if !strings.Contains(call.Error, tt.errText) || (call.Error == "") != (tt.status == StatusOK) {
				t.Errorf("error = %q, want it to contain %q", call.Error, tt.errText)
			}
			if want := filepath.Join(ev, attempt, "1.stdout"); call.StdoutPath != want {
				t.Errorf("stdout_path = %s, want %s", call.StdoutPath, want)
			}
			if call.AdapterID != tt.adapter || call.AdapterKind != KindScript || call.TaskID != "task-1" || call.AttemptID != attempt || call.Seq != 1 {
				t.Errorf("identity fields wrong: %+v", call)
			}
			if !jsonEq(call.Request, []byte(tt.input)) && !(tt.input == "" && call.Request == nil) {
				t.Errorf("request = %s, want %s", call.Request, tt.input)
			}
			if call.Model != nil || call.Endpoint != nil || call.HTTPStatus != nil {
				t.Errorf("model/endpoint/http_status should be null for a script: %+v", call)
			}
			if tt.adapter == "upper-native" && (call.AutonomyProfile == nil || *call.AutonomyProfile != ProfileRuntimeNative) {
				t.Errorf("autonomy_profile = %v, want runtime-native", call.AutonomyProfile)
			}
			if call.EndedAt.Before(call.StartedAt) || call.DurationMS < 0 {
				t.Errorf("times: %v .. %v (%d ms)", call.StartedAt, call.EndedAt, call.DurationMS)
			}
		})
	}
}

func intp(i int) *int { return &i }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestScriptEvidenceFiles checks the evidence files hold the raw bytes and that
// a second call in an attempt gets the next number.
func TestScriptEvidenceFiles(t *testing.T) {
	bin := t.TempDir()
	s := writeScript(t, bin, "s.sh", `cat; printf 'err' >&2`)
	r, ev := newRegistry(t, script("s", s, 5000))
	for n := 1; n <= 2; n++ {
		call, err := r.Invoke(context.Background(), []string{"s"}, "s", req("a1", `"line `+strconv.Itoa(n)+`\n"`))
		if err != nil {
			t.Fatal(err)
		}
		if call.Seq != n || call.StdoutPath != filepath.Join(ev, "a1", strconv.Itoa(n)+".stdout") || call.StderrPath != filepath.Join(ev, "a1", strconv.Itoa(n)+".stderr") {
			t.Fatalf("call %d: seq %d, paths %s %s", n, call.Seq, call.StdoutPath, call.StderrPath)
		}
		if got := readFile(t, call.StdoutPath); got != "line "+strconv.Itoa(n)+"\n" {
			t.Errorf("stdout file = %q", got)
		}
		if readFile(t, call.StderrPath) != "err" || call.StderrBytes != 3 || call.StdoutBytes != 7 {
			t.Errorf("stderr file %q, bytes %d/%d", readFile(t, call.StderrPath), call.StdoutBytes, call.StderrBytes)
		}
	}
}

func TestScriptTimeoutKillsGroup(t *testing.T) {
	bin, work := t.TempDir(), t.TempDir()
	s := writeScript(t, bin, "sleepy.sh", `sleep 60 &
echo $! > child.pid
echo started
sleep 60`)
	a := script("sleepy", s, 500)
	a.WorkingDir = work
	r, _ := newRegistry(t, a)

	start := time.Now()
	call, err := r.Invoke(context.Background(), []string{"sleepy"}, "sleepy", req("a1", ""))
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Fatalf("Invoke took %v; the 60s sleeps were not killed", elapsed)
	}
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if call.ExitStatus != StatusTimeout || call.ExitCode != nil || !strings.Contains(call.Error, "timeout_ms 500") {
		t.Errorf("call: status %s, exit_code %v, error %q", call.ExitStatus, deref(call.ExitCode), call.Error)
	}
	if readFile(t, call.StdoutPath) != "started\n" {
		t.Errorf("output before the timeout not kept: %q", readFile(t, call.StdoutPath))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(work, "child.pid"))))
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { return !alive(pid) }) {
		t.Errorf("background child %d still running after the timeout", pid)
	}
}

func TestScriptCallerCancel(t *testing.T) {
	s := writeScript(t, t.TempDir(), "sleepy.sh", `sleep 60`)
	r, _ := newRegistry(t, script("sleepy", s, 60000))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	call, err := r.Invoke(ctx, []string{"sleepy"}, "sleepy", req("a1", ""))
	if !errors.Is(err, context.Canceled) || call == nil || call.ExitStatus != StatusError {
		t.Fatalf("err = %v, call %+v", err, call)
	}
	// A context that is already done runs nothing.
	call, err = r.Invoke(ctx, []string{"sleepy"}, "sleepy", req("a2", ""))
	if call != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("done ctx: call %v, err %v", call, err)
	}
}

func TestScriptCaptureCap(t *testing.T) {
	bin := t.TempDir()
	loud := writeScript(t, bin, "loud.sh", `head -c 100000 /dev/zero | tr '\0' a; sleep 60`)
	noisy := writeScript(t, bin, "noisy.sh", `head -c 5000 /dev/zero | tr '\0' e >&2; echo '{"ok":true}'`)
	r, _ := newRegistry(t, script("loud", loud, 60000), script("noisy", noisy, 5000))
	r.capture = 1000

	start := time.Now()
	call, err := r.Invoke(context.Background(), []string{"loud"}, "loud", req("a1", ""))
	if time.Since(start) > 20*time.Second {
		t.Fatal("stdout over the cap did not stop the command")
	}
	if !errors.Is(err, ErrFailed) || call.ExitStatus != StatusError || !call.StdoutTruncated || call.Response != nil {
		t.Fatalf("err %v, call %+v", err, call)
	}
	if fi, _ := os.Stat(call.StdoutPath); fi.Size() != 1000 || call.StdoutBytes < 1000 {
		t.Errorf("stdout file %d bytes, stdout_bytes %d", fi.Size(), call.StdoutBytes)
	}
	if !strings.Contains(call.Error, "capture limit of 1000 bytes") {
		t.Errorf("error = %q", call.Error)
	}

	call, err = r.Invoke(context.Background(), []string{"noisy"}, "noisy", req("a2", ""))
	if err != nil || !call.StderrTruncated || call.StderrBytes != 5000 || !jsonEq(call.Response, []byte(`{"ok":true}`)) {
		t.Fatalf("err %v, call %+v", err, call)
	}
	if fi, _ := os.Stat(call.StderrPath); fi.Size() != 1000 {
		t.Errorf("stderr file %d bytes", fi.Size())
	}
}

func TestScriptNoWorkingDir(t *testing.T) {
	s := writeScript(t, t.TempDir(), "pwd.sh", `pwd; ls -A | wc -l`)
	r, _ := newRegistry(t, script("pwd", s, 5000))
	call, err := r.Invoke(context.Background(), []string{"pwd"}, "pwd", req("a1", ""))
	if err != nil {
		t.Fatal(err)
	}
	var out string
	json.Unmarshal(call.Response, &out)
	dir, count, _ := strings.Cut(strings.TrimSpace(out), "\n")
	cwd, _ := os.Getwd()
	if dir == cwd || strings.TrimSpace(count) != "0" {
		t.Errorf("ran in %s with %s entries; want a fresh empty directory", dir, count)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("scratch directory %s not removed", dir)
	}
}

func TestHarness(t *testing.T) {
	bin, work, bare := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, ".claude", "settings.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	// A stand-in harness: reports its arguments and stdin as JSON.
	fake := writeScript(t, bin, "fake-harness", `touch `+marker+`
printf '{"args":['; sep=''
for a in "$@"; do printf '%s"%s"' "$sep" "$a"; sep=','; done
printf '],"stdin":"%s"}' "$(cat)"`)

	claude := AdapterConfig{
		AdapterID: "claude", Kind: KindClaudeCode, Command: fake, WorkingDir: work, TimeoutMS: 5000,
		Sandbox: SandboxWorkspaceWrite, Model: "claude-sonnet-4",
		Autonomy: &Autonomy{Profile: ProfileTrustedVM, RequiredArgs: []string{"--dangerously-skip-permissions"},
			RequiredSettingsFiles: []string{".claude/settings.json"}},
		ExtraArgs: []string{"-p", "--output-format", "json"},
	}
	unsettled := claude.clone()
	unsettled.AdapterID, unsettled.WorkingDir = "claude-unsettled", bare
	codex := AdapterConfig{
		AdapterID: "codex", Kind: KindCodex, Command: fake, TimeoutMS: 5000, Sandbox: SandboxReadOnly, Model: "gpt-5-codex", Models: []string{"gpt-5-mini"},
		Provider: &Provider{ID: "openai", WireAPI: "responses"},
		Autonomy: &Autonomy{Profile: ProfileRestricted, RequiredArgs: []string{"exec", "--sandbox", "read-only"}},
	}
	hermes := AdapterConfig{
		AdapterID: "hermes", Kind: KindHermesAgent, Command: fake, TimeoutMS: 5000,
		Autonomy: &Autonomy{Profile: ProfileRestricted}, ExtraArgs: []string{"chat"},
	}
	r, _ := newRegistry(t, claude, unsettled, codex, hermes)
	all := r.IDs()

	tests := []struct {
		adapter  string
		response string
		profile  Profile
		sandbox  string
		model    string
		sentinel error
	}{
		{"claude", `{"args":["--dangerously-skip-permissions","--model","claude-sonnet-4","-p","--output-format","json"],"stdin":"do the task"}`, ProfileTrustedVM, "workspace-write", "claude-sonnet-4", nil},
		{"codex", `{"args":["exec","--sandbox","read-only","--model","gpt-5-codex"],"stdin":"do the task"}`, ProfileRestricted, "read-only", "gpt-5-codex", nil},
		{"hermes", `{"args":["chat"],"stdin":"do the task"}`, ProfileRestricted, "", "", nil},
		{"claude-unsettled", "", ProfileTrustedVM, "workspace-write", "claude-sonnet-4", ErrSettingsMissing},
	}
	for _, tt := range tests {
		t.Run(tt.adapter, func(t *testing.T) {
			os.Remove(marker)
			call, err := r.Invoke(context.Background(), all, tt.adapter, req("a-"+tt.adapter, `"do the task"`))
			if !errors.Is(err, tt.sentinel) || call == nil {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			if tt.sentinel != nil {
				if !errors.Is(err, ErrFailed) || call.ExitStatus != StatusError || !strings.Contains(call.Error, ".claude/settings.json") {
					t.Errorf("err %v, call %+v", err, call)
				}
				if _, err := os.Stat(marker); !os.IsNotExist(err) {
					t.Errorf("harness started although a required settings file is missing")
				}
			} else if !jsonEq(call.Response, []byte(tt.response)) {
				t.Errorf("response = %s, want %s", call.Response, tt.response)
			}
			a, _ := r.Adapter(tt.adapter)
			if call.AdapterKind != a.Kind || call.AutonomyProfile == nil || *call.AutonomyProfile != tt.profile {
				t.Errorf("kind %s, autonomy_profile %v", call.AdapterKind, call.AutonomyProfile)
			}
			if got := strp(call.Sandbox); got != tt.sandbox {
				t.Errorf("sandbox = %q, want %q", got, tt.sandbox)
			}
			if got := strp(call.Model); got != tt.model {
				t.Errorf("model = %q, want %q", got, tt.model)
			}
			if tt.sentinel == nil && (len(call.Argv) == 0 || call.Argv[0] != fake) {
				t.Errorf("argv = %q", call.Argv)
			}
		})
	}
	// A requested model the adapter offers replaces the default on the
	// argv and in the record; one it does not offer is refused, nothing run.
	rq := req("a-codex-mini", `"do the task"`)
	rq.Model = "gpt-5-mini"
	call, err := r.Invoke(context.Background(), all, "codex", rq)
	if err != nil || strp(call.Model) != "gpt-5-mini" || !jsonEq(call.Response, []byte(`{"args":["exec","--sandbox","read-only","--model","gpt-5-mini"],"stdin":"do the task"}`)) {
		t.Fatalf("requested model: %v %+v %s", err, call, call.Response)
	}
	rq.Model = "gpt-x"
	if call, err := r.Invoke(context.Background(), all, "codex", rq); !errors.Is(err, ErrInvalidRequest) || call != nil || !strings.Contains(err.Error(), `model "gpt-x"`) {
		t.Fatalf("unknown model: %v %+v", err, call)
	}
}

func strp[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}
