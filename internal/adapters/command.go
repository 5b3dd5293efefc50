package adapters

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// defaultPath is the command's PATH when neither its config nor the host
// has one.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

var (
	// errTimeoutCause marks a context ended by timeout_ms.
	errTimeoutCause = errors.New("timeout_ms passed")
	// errStdoutCap marks a command stopped for writing too much to stdout.
	errStdoutCap = errors.New("stdout over the capture limit")
)

// runCommand runs a script or harness adapter: command, then
// autonomy.required_args, then (harness kinds) --model MODEL, then extra_args, without a shell, input on stdin,
// in its own process group.
func (r *Registry) runCommand(ctx context.Context, a *AdapterConfig, stdin []byte, call *Call, outF, errF *os.File) error {
	dir := a.WorkingDir
	var settings, args []string
	if a.Autonomy != nil {
		settings = a.Autonomy.RequiredSettingsFiles
		args = append(args, a.Autonomy.RequiredArgs...)
	}
	if a.Kind.IsHarness() && a.Model != "" {
		// Every harness CLI takes --model (claude, codex exec, hermes);
		// after the required args, which may name a subcommand.
		args = append(args, "--model", a.Model)
	}
	args = append(args, a.ExtraArgs...)
	for _, f := range settings {
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %w: %s (declared in autonomy.required_settings_files)", ErrFailed, ErrSettingsMissing, f)
		}
	}
	env, err := commandEnv(a)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	prog, err := lookPath(a.Command, env)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFailed, err)
	}
	call.Argv = append([]string{prog}, args...)
	if dir == "" {
		// No working_dir: a fresh empty directory, not the host's.
		if dir, err = os.MkdirTemp("", "packrun-adapter-"); err != nil {
			return fmt.Errorf("%w: working directory: %w", ErrFailed, err)
		}
		defer os.RemoveAll(dir)
	}

	capCtx, stopCap := context.WithCancelCause(ctx)
	defer stopCap(nil)
	runCtx, cancel := context.WithTimeoutCause(capCtx, time.Duration(a.TimeoutMS)*time.Millisecond, errTimeoutCause)
	defer cancel()

	cmd := exec.CommandContext(runCtx, prog, args...)
	cmd.Env = env
	cmd.Dir = dir
	if len(stdin) > 0 {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out := &capture{f: outF, limit: r.capture, buf: &bytes.Buffer{}, overflow: func() { stopCap(fmt.Errorf("%w of %d bytes", errStdoutCap, r.capture)) }}
	errW := &capture{f: errF, limit: r.capture}
	cmd.Stdout, cmd.Stderr = out, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = waitDelay

	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%w: start %s: %w", ErrFailed, prog, err)
	}
	waitErr := cmd.Wait()
	// Whatever the command left running in its group goes with it.
	_ = killGroup(cmd.Process.Pid)

	call.StdoutBytes, call.StderrBytes = out.n, errW.n
	call.StdoutTruncated, call.StderrTruncated = out.truncated(), errW.truncated()
	if st := cmd.ProcessState; st != nil && st.Exited() {
		code := st.ExitCode()
		call.ExitCode = &code
	}
	if !out.truncated() {
		call.Response = responseOf(out.buf.Bytes())
	}
	if out.err != nil || errW.err != nil {
		return fmt.Errorf("%w: evidence: %w", ErrFailed, errors.Join(out.err, errW.err))
	}

	exitedOK := waitErr == nil || errors.Is(waitErr, exec.ErrWaitDelay)
	if exitedOK && cmd.ProcessState.Success() && !out.truncated() {
		return nil
	}
	if runCtx.Err() != nil {
		return ended(runCtx, a.TimeoutMS)
	}
	if out.truncated() {
		return ended(capCtx, a.TimeoutMS)
	}
	var msg string
	if st := cmd.ProcessState; st != nil {
		msg = st.String() // "exit status 3", "signal: killed"
	} else {
		msg = waitErr.Error()
	}
	if tail := errW.excerpt(); tail != "" {
		msg += ": " + tail
	}
	return fmt.Errorf("%w: %s", ErrFailed, msg)
}

// ended explains why ctx ended: timeout_ms, the caller's deadline or
// cancellation, or the stdout cap.
func ended(ctx context.Context, timeoutMS int64) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTimeoutCause):
		return fmt.Errorf("%w: no result within timeout_ms %d: %w", ErrTimeout, timeoutMS, context.DeadlineExceeded)
	case errors.Is(cause, context.DeadlineExceeded):
		return fmt.Errorf("%w: the caller's deadline passed: %w", ErrTimeout, cause)
	case errors.Is(cause, errStdoutCap):
		return fmt.Errorf("%w: stopped: %w", ErrFailed, cause)
	case errors.Is(cause, context.Canceled):
		return fmt.Errorf("canceled: %w", cause)
	default:
		return fmt.Errorf("%w: %w", ErrFailed, cause)
	}
}

// killGroup kills the process group led by pid.
func killGroup(pid int) error {
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// commandEnv is the command's whole environment: env_file, then env, then
// PATH from the host if neither set it. Nothing else of the host's
// environment is passed.
func commandEnv(a *AdapterConfig) ([]string, error) {
	vars := map[string]string{}
	if a.EnvFile != "" {
		if err := readEnvFile(a.EnvFile, vars); err != nil {
			return nil, err
		}
	}
	for k, v := range a.Env {
		vars[k] = v
	}
	if _, ok := vars["PATH"]; !ok {
		vars["PATH"] = os.Getenv("PATH")
		if vars["PATH"] == "" {
			vars["PATH"] = defaultPath
		}
	}
	env := make([]string, 0, len(vars))
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env, nil
}

// readEnvFile adds the KEY=VALUE lines of path to vars. Blank lines and
// lines starting with '#' are skipped, an "export " prefix is allowed, and
// one pair of matching quotes around a value is removed; nothing else is
// interpreted.
func readEnvFile(path string, vars map[string]string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("env_file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxEnvFileBytes+1))
	if err != nil {
		return fmt.Errorf("env_file %s: %w", path, err)
	}
	if len(b) > MaxEnvFileBytes {
		return fmt.Errorf("env_file %s: more than the %d bytes allowed", path, MaxEnvFileBytes)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, MaxEnvFileBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		line = strings.TrimPrefix(line, "export ")
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || !envNamePattern().MatchString(k) {
			return fmt.Errorf("env_file %s line %d: not KEY=VALUE", path, n)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("env_file %s line %d: NUL byte in value", path, n)
		}
		vars[k] = v
	}
	return sc.Err()
}

// lookPath resolves a command without a slash on the PATH the command will
// get (not the host's), skipping empty and relative PATH entries.
func lookPath(command string, env []string) (string, error) {
	if strings.ContainsRune(command, '/') {
		return command, nil
	}
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found on PATH %q", command, path)
}
