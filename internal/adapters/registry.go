package adapters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EvidenceDirName is the evidence directory's usual name inside $PACKRUN_HOME.
const EvidenceDirName = "adapter-runs"

// Registry runs the adapters of one validated Config. It is immutable and
// safe for concurrent use.
type Registry struct {
	adapters    map[string]AdapterConfig
	evidenceDir string
	client      *http.Client
	capture     int64 // MaxCaptureBytes; lowered by tests
}

// NewRegistry validates cfg and returns a Registry over a copy of it.
// Calls' stdout and stderr are written under evidenceDir (usually
// $PACKRUN_HOME/adapter-runs), as <attempt_id>/<n>.stdout and .stderr;
// the directories are created when first needed. Relative paths in cfg are
// made absolute against the current directory.
func NewRegistry(cfg *Config, evidenceDir string) (*Registry, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if evidenceDir == "" {
		return nil, errors.New("adapters: evidence directory not set")
	}
	ev, err := filepath.Abs(evidenceDir)
	if err != nil {
		return nil, fmt.Errorf("adapters: evidence directory: %w", err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, fmt.Errorf("adapters: %w", err)
	}
	copied := &Config{Adapters: make([]AdapterConfig, len(cfg.Adapters))}
	for i, a := range cfg.Adapters {
		copied.Adapters[i] = a.clone()
	}
	copied.resolve(cwd)
	r := &Registry{
		adapters:    make(map[string]AdapterConfig, len(copied.Adapters)),
		evidenceDir: ev,
		capture:     MaxCaptureBytes,
		client: &http.Client{
			Transport: http.DefaultTransport.(*http.Transport).Clone(),
			// A redirect would send the prompt somewhere the config does not name.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for _, a := range copied.Adapters {
		r.adapters[a.AdapterID] = a
	}
	return r, nil
}

// IDs returns the configured adapter ids, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.adapters))
	for id := range r.adapters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Adapter returns a copy of the adapter's config.
func (r *Registry) Adapter(id string) (AdapterConfig, bool) {
	a, ok := r.adapters[id]
	return a.clone(), ok
}

// Request is one adapter invocation.
type Request struct {
	// Input is one JSON value. A JSON string is text: its content is what a
	// command reads on stdin and the prompt Ollama gets. Any other value is
	// passed to a command as JSON; ollama-generate takes its "prompt"
	// string. Empty means no input (empty stdin).
	Input json.RawMessage
	// TaskID is recorded in the Call.
	TaskID string
	// AttemptID names the evidence directory of the calls; required.
	AttemptID string
	// Model is the model this call uses: one the adapter offers (see
	// AdapterConfig.Offers), or "" for its default model. It is recorded in
	// the Call, sent to Ollama, and passed to a harness as --model M.
	Model string
}

// ExitStatus is how a call ended, as in the schema's TaskAttempt.
type ExitStatus string

const (
	StatusOK      ExitStatus = "ok"
	StatusError   ExitStatus = "error"
	StatusTimeout ExitStatus = "timeout"
)

// Call is the evidence record of one adapter call. Every kind produces the
// same shape: every key is always present, and a value that does not apply
// to the kind is null.
type Call struct {
	AdapterID   string `json:"adapter_id"`
	AdapterKind Kind   `json:"adapter_kind"`
	TaskID      string `json:"task_id"`
	AttemptID   string `json:"attempt_id"`
	// Seq numbers the calls of one attempt from 1; it names the files.
	Seq int `json:"seq"`
	// The declared posture: model (harness, ollama-generate), autonomy
	// profile (harness; script when it declares runtime-native), sandbox
	// (harness, when declared).
	Model           *string  `json:"model"`
	AutonomyProfile *Profile `json:"autonomy_profile"`
	Sandbox         *Sandbox `json:"sandbox"`
	// Argv is the command line run (command kinds), program path resolved.
	Argv []string `json:"argv"`
	// Endpoint is the URL posted to (ollama-generate).
	Endpoint *string `json:"endpoint"`
	// Request is Request.Input, or null.
	Request json.RawMessage `json:"request"`
	// Response is the command's stdout as JSON when it is a JSON value, else
	// as a JSON string; Ollama's "response" string; null when there was
	// none (empty stdout, or the call failed before one).
	Response json.RawMessage `json:"response"`
	// StdoutPath and StderrPath always exist. For ollama-generate stdout
	// holds the HTTP response body and stderr is empty.
	StdoutPath string `json:"stdout_path"`
	StderrPath string `json:"stderr_path"`
	// Bytes produced, including any dropped past the capture limit (an HTTP
	// body is read only to just past it).
	StdoutBytes     int64      `json:"stdout_bytes"`
	StderrBytes     int64      `json:"stderr_bytes"`
	StdoutTruncated bool       `json:"stdout_truncated"`
	StderrTruncated bool       `json:"stderr_truncated"`
	ExitStatus      ExitStatus `json:"exit_status"`
	// ExitCode is the command's exit code; null if it did not start, was
	// killed by a signal, or is not a command.
	ExitCode *int `json:"exit_code"`
	// HTTPStatus is Ollama's HTTP status; null if no response or not HTTP.
	HTTPStatus *int      `json:"http_status"`
	DurationMS int64     `json:"duration_ms"`
	StartedAt  time.Time `json:"started_at"`
	EndedAt    time.Time `json:"ended_at"`
	// Error says what went wrong; "" when ExitStatus is ok.
	Error string `json:"error"`
}

var attemptIDPattern = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Invoke runs adapter adapterID if granted lists it. granted is the pack's
// adapter grant; nil grants nothing.
//
// It refuses, with a nil *Call and nothing run, an adapter not granted
// (ErrNotGranted), granted but not configured (ErrUnknownAdapter), a bad
// request (ErrInvalidRequest), a done ctx, or evidence files that cannot be
// created. Otherwise it returns the Call,
// which is evidence to record whatever happened, and an error when the call
// did not end ok: ErrFailed, ErrTimeout, or context.Canceled when ctx was
// canceled. Every error is an *InvokeError.
func (r *Registry) Invoke(ctx context.Context, granted []string, adapterID string, req Request) (*Call, error) {
	fail := func(err error) (*Call, error) { return nil, &InvokeError{AdapterID: adapterID, Err: err} }
	if !slices.Contains(granted, adapterID) {
		return fail(ErrNotGranted)
	}
	a, ok := r.adapters[adapterID]
	if !ok {
		return fail(ErrUnknownAdapter)
	}
	input, err := req.check()
	if err != nil {
		return fail(err)
	}
	if req.Model != "" {
		if !a.Offers(req.Model) {
			return fail(fmt.Errorf("%w: adapter %s does not offer model %q (offers: %s)", ErrInvalidRequest, adapterID, req.Model, strings.Join(a.OfferedModels(), ", ")))
		}
		a.Model = req.Model // a is this call's copy
	}
	var prompt string
	if a.Kind == KindOllamaGenerate {
		if prompt, err = promptOf(input); err != nil {
			return fail(err)
		}
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	seq, stdout, stderr, err := r.openEvidence(req.AttemptID)
	if err != nil {
		return fail(fmt.Errorf("evidence: %w", err))
	}
	defer stdout.Close()
	defer stderr.Close()

	call := &Call{
		AdapterID:   a.AdapterID,
		AdapterKind: a.Kind,
		TaskID:      req.TaskID,
		AttemptID:   req.AttemptID,
		Seq:         seq,
		Request:     input,
		StdoutPath:  stdout.Name(),
		StderrPath:  stderr.Name(),
		StartedAt:   time.Now().UTC(),
	}
	if a.Model != "" {
		call.Model = &a.Model
	}
	if a.Autonomy != nil {
		p := a.Autonomy.Profile
		call.AutonomyProfile = &p
	}
	if a.Sandbox != "" {
		call.Sandbox = &a.Sandbox
	}

	if a.Kind == KindOllamaGenerate {
		err = r.runOllama(ctx, &a, prompt, call, stdout)
	} else {
		err = r.runCommand(ctx, &a, stdinOf(input), call, stdout, stderr)
	}
	if cerr := stdout.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("%w: evidence: %w", ErrFailed, cerr)
	}
	if cerr := stderr.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("%w: evidence: %w", ErrFailed, cerr)
	}
	call.EndedAt = time.Now().UTC()
	call.DurationMS = call.EndedAt.Sub(call.StartedAt).Milliseconds()
	switch {
	case err == nil:
		call.ExitStatus = StatusOK
		return call, nil
	case errors.Is(err, ErrTimeout):
		call.ExitStatus = StatusTimeout
	default:
		call.ExitStatus = StatusError
	}
	call.Error = err.Error()
	return call, &InvokeError{AdapterID: adapterID, Err: err}
}

// check validates the request and returns its input compacted, or nil.
func (req Request) check() (json.RawMessage, error) {
	switch {
	case req.AttemptID == "":
		return nil, fmt.Errorf("%w: attempt id is required", ErrInvalidRequest)
	case len(req.AttemptID) > maxIDLen || !attemptIDPattern().MatchString(req.AttemptID):
		return nil, fmt.Errorf("%w: attempt id %q: use at most %d letters, digits, '.', '_' and '-', not starting with '.'", ErrInvalidRequest, req.AttemptID, maxIDLen)
	case len(req.TaskID) > maxTaskIDLen:
		return nil, fmt.Errorf("%w: task id longer than %d bytes", ErrInvalidRequest, maxTaskIDLen)
	case len(req.Input) > MaxInputBytes:
		return nil, fmt.Errorf("%w: input is %d bytes, more than the %d allowed", ErrInvalidRequest, len(req.Input), MaxInputBytes)
	}
	if len(bytes.TrimSpace(req.Input)) == 0 {
		return nil, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, req.Input); err != nil {
		return nil, fmt.Errorf("%w: input is not JSON: %w", ErrInvalidRequest, err)
	}
	return b.Bytes(), nil
}

// stdinOf is what a command reads: a JSON string's content, else the JSON.
func stdinOf(input json.RawMessage) []byte {
	var s string
	if len(input) > 0 && input[0] == '"' && json.Unmarshal(input, &s) == nil {
		return []byte(s)
	}
	return input
}

// promptOf is ollama-generate's prompt: a JSON string, or {"prompt": "..."}.
func promptOf(input json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(input, &s) == nil && len(input) > 0 && input[0] == '"' {
		return s, nil
	}
	var obj struct {
		Prompt *string `json:"prompt"`
	}
	if len(input) > 0 && input[0] == '{' && json.Unmarshal(input, &obj) == nil && obj.Prompt != nil {
		return *obj.Prompt, nil
	}
	return "", fmt.Errorf("%w: ollama-generate needs a string input or an object with a \"prompt\" string", ErrInvalidRequest)
}

// openEvidence creates the next free <n>.stdout and <n>.stderr of the attempt.
func (r *Registry) openEvidence(attemptID string) (int, *os.File, *os.File, error) {
	dir := filepath.Join(r.evidenceDir, attemptID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, nil, nil, err
	}
	for n := 1; n <= maxCallsPerAttempt; n++ {
		base := filepath.Join(dir, strconv.Itoa(n))
		out, err := os.OpenFile(base+".stdout", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return 0, nil, nil, err
		}
		errf, err := os.OpenFile(base+".stderr", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			out.Close()
			return 0, nil, nil, err
		}
		return n, out, errf, nil
	}
	return 0, nil, nil, fmt.Errorf("attempt %s has more than %d adapter calls", attemptID, maxCallsPerAttempt)
}

// capture keeps the first limit bytes written in f (and in buf, if set),
// counts the rest, keeps a short tail for error messages, and calls
// overflow once when the limit is passed.
type capture struct {
	f        *os.File
	limit    int64
	buf      *bytes.Buffer
	tail     []byte
	n        int64
	err      error
	overflow func()
}

func (w *capture) Write(p []byte) (int, error) {
	if room := w.limit - w.n; room > 0 {
		q := p
		if int64(len(q)) > room {
			q = q[:room]
		}
		if w.err == nil {
			_, w.err = w.f.Write(q)
		}
		if w.buf != nil {
			w.buf.Write(q)
		}
	}
	w.tail = append(w.tail, p...)
	if len(w.tail) > excerptBytes {
		w.tail = append(w.tail[:0], w.tail[len(w.tail)-excerptBytes:]...)
	}
	w.n += int64(len(p))
	if w.n > w.limit && w.overflow != nil {
		w.overflow()
		w.overflow = nil
	}
	return len(p), nil // keep draining: a blocked writer would hang the process
}

func (w *capture) truncated() bool { return w.n > w.limit }

// excerpt is the tail of what was written, on one line.
func (w *capture) excerpt() string {
	return oneLine(strings.ToValidUTF8(string(w.tail), "\uFFFD"))
}

// responseOf turns output into a Call response: a JSON value as is
// (compacted), other text as a JSON string, nothing as null.
func responseOf(out []byte) json.RawMessage {
	if len(out) == 0 {
		return nil
	}
	var b bytes.Buffer
	if json.Valid(out) && json.Compact(&b, out) == nil {
		return b.Bytes()
	}
	s, _ := json.Marshal(string(out)) // invalid UTF-8 becomes U+FFFD; the file keeps the bytes
	return s
}
