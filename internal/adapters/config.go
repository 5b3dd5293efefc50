package adapters

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ConfigFileName is the adapter config's name inside $PACKRUN_HOME.
const ConfigFileName = "adapters.json"

// Kind is an adapter kind.
type Kind string

// The adapter kinds of the agent runtime schema.
const (
	KindScript         Kind = "script"
	KindOllamaGenerate Kind = "ollama-generate"
	KindClaudeCode     Kind = "claude-code"
	KindCodex          Kind = "codex"
	KindHermesAgent    Kind = "hermes-agent"
)

// Kinds lists every kind, in the order error messages name them.
var Kinds = []Kind{KindScript, KindOllamaGenerate, KindClaudeCode, KindCodex, KindHermesAgent}

// IsHarness reports whether k is a CLI agent harness (claude-code, codex,
// hermes-agent): run as a command, with a declared autonomy posture.
func (k Kind) IsHarness() bool {
	return k == KindClaudeCode || k == KindCodex || k == KindHermesAgent
}

// runsCommand reports whether k is run as a local command.
func (k Kind) runsCommand() bool { return k == KindScript || k.IsHarness() }

// Profile is an autonomy profile.
type Profile string

const (
	// ProfileRestricted: the harness runs with its own permission prompts
	// and sandbox. Flags that bypass them are refused.
	ProfileRestricted Profile = "restricted"
	// ProfileTrustedVM: the harness runs unattended with its safeguards
	// off, which is only acceptable inside a disposable VM.
	ProfileTrustedVM Profile = "trusted-vm"
	// ProfileRuntimeNative: a script, whose only limits are the runtime's.
	ProfileRuntimeNative Profile = "runtime-native"
)

// Sandbox is a harness's declared filesystem sandbox.
type Sandbox string

const (
	SandboxReadOnly         Sandbox = "read-only"
	SandboxWorkspaceWrite   Sandbox = "workspace-write"
	SandboxDangerFullAccess Sandbox = "danger-full-access"
)

// Config is the content of adapters.json.
type Config struct {
	Adapters []AdapterConfig `json:"adapters"`
}

// AdapterConfig is one adapter, in the shape of the agent runtime schema's
// AdapterConfig (a union by Kind; fields that a kind does not have must be
// empty). Paths are absolute after LoadConfig.
type AdapterConfig struct {
	AdapterID string `json:"adapter_id"`
	Kind      Kind   `json:"kind"`
	// Command is the program: absolute, relative to the config file's
	// directory when it contains a slash, else looked up on the PATH the
	// command will get. Required for every kind but ollama-generate.
	Command string `json:"command,omitempty"`
	// WorkingDir is where the command runs; when empty it runs in a fresh
	// empty directory removed after the call.
	WorkingDir string `json:"working_dir,omitempty"`
	// TimeoutMS bounds one call, required, 1..MaxTimeoutMS.
	TimeoutMS int64 `json:"timeout_ms"`
	// Sandbox is recorded in every Call (harness kinds only).
	Sandbox Sandbox `json:"sandbox,omitempty"`
	// EnvFile holds KEY=VALUE lines, read at every call; Env overrides it.
	// The command's environment is these two plus PATH, nothing else.
	EnvFile string            `json:"env_file,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Model is the adapter's default model: recorded in every Call
	// (harness kinds, which also get it on their argv as --model M), or
	// sent to Ollama (ollama-generate, required).
	Model string `json:"model,omitempty"`
	// Models are the other models a task may ask for (requested_model,
	// default_model); the adapter offers Model and these (see Offers).
	Models   []string  `json:"models,omitempty"`
	Provider *Provider `json:"provider,omitempty"` // codex only
	// Autonomy is required for harness kinds; for script it may only say
	// runtime-native.
	Autonomy  *Autonomy `json:"autonomy,omitempty"`
	ExtraArgs []string  `json:"extra_args,omitempty"`
	// Endpoint is Ollama's base URL (ollama-generate only), e.g.
	// "http://127.0.0.1:11434".
	Endpoint string `json:"endpoint,omitempty"`
}

// Autonomy is a harness's declared autonomy posture.
type Autonomy struct {
	Profile Profile `json:"profile"`
	// RequiredArgs come right after the command, before ExtraArgs. Flags
	// that turn a harness's safeguards off belong here, under trusted-vm.
	RequiredArgs []string `json:"required_args,omitempty"`
	// RequiredSettingsFiles must exist before the command starts
	// (claude-code only); relative paths are relative to WorkingDir.
	RequiredSettingsFiles []string `json:"required_settings_files,omitempty"`
}

// Provider is codex's model provider.
type Provider struct {
	ID                 string `json:"id"`
	Name               string `json:"name,omitempty"`
	BaseURL            string `json:"base_url,omitempty"`
	WireAPI            string `json:"wire_api,omitempty"` // "responses"
	RequiresOpenAIAuth *bool  `json:"requires_openai_auth,omitempty"`
}

// LoadConfig reads and validates the adapter config at path (usually
// $PACKRUN_HOME/adapters.json). A missing file is an empty config. A file
// larger than MaxConfigBytes, not JSON, or with any problem is refused with a
// *ConfigError listing every problem. Relative paths in it are made absolute
// against the file's directory.
func LoadConfig(path string) (*Config, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load adapter config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load adapter config %s: %w", path, err)
	}
	cfg, err := DecodeConfig(b)
	if err != nil {
		var ce *ConfigError
		if errors.As(err, &ce) {
			ce.File = path
		}
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("load adapter config %s: %w", path, err)
	}
	cfg.resolve(filepath.Dir(abs))
	return cfg, nil
}

// DecodeConfig parses and validates adapters.json content. It must be one
// JSON object {"adapters": [...]} without unknown fields or duplicate keys.
// Paths are left as written.
func DecodeConfig(b []byte) (*Config, error) {
	if len(b) > MaxConfigBytes {
		return nil, &ConfigError{Problems: []Problem{{"$", fmt.Sprintf("more than the %d bytes allowed", MaxConfigBytes)}}}
	}
	c := &checker{}
	tree, err := parseJSON(b, c)
	if err != nil {
		return nil, &ConfigError{Problems: []Problem{{"$", "not valid JSON: " + err.Error()}}}
	}
	cfg := decodeConfig(c, tree)
	cfg.check(c)
	if len(c.problems) > 0 {
		return nil, &ConfigError{Problems: c.problems}
	}
	return cfg, nil
}

// Validate checks a Config built in Go and returns a *ConfigError listing
// every problem, or nil. NewRegistry calls it.
func (cfg *Config) Validate() error {
	c := &checker{}
	cfg.check(c)
	if len(c.problems) > 0 {
		return &ConfigError{Problems: c.problems}
	}
	return nil
}

var (
	// adapterIDPattern is the packs manifest's identifier pattern, so grants
	// and configs name adapters the same way.
	adapterIDPattern = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9][A-Za-z0-9_-]*)*$`)
	envNamePattern   = lazyRegexp(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// trustedVMArg matches arguments known to switch a harness's safeguards
	// off (claude --dangerously-skip-permissions and
	// --permission-mode bypassPermissions, codex
	// --dangerously-bypass-approvals-and-sandbox, --yolo, --sandbox
	// danger-full-access). A tripwire against burying the posture in
	// extra_args, not a complete list.
	trustedVMArg = lazyRegexp(`(?i)dangerously|yolo|bypasspermissions|danger-full-access`)
)

// fieldsOf lists the fields each kind has, as in the schema's union.
var fieldsOf = map[Kind][]string{
	KindScript:         {"adapter_id", "kind", "command", "working_dir", "timeout_ms", "env_file", "env", "autonomy", "extra_args"},
	KindOllamaGenerate: {"adapter_id", "kind", "endpoint", "model", "models", "timeout_ms"},
	KindClaudeCode:     {"adapter_id", "kind", "command", "working_dir", "timeout_ms", "sandbox", "env_file", "env", "model", "models", "autonomy", "extra_args"},
	KindCodex:          {"adapter_id", "kind", "command", "working_dir", "timeout_ms", "sandbox", "env_file", "env", "model", "models", "provider", "autonomy", "extra_args"},
	KindHermesAgent:    {"adapter_id", "kind", "command", "working_dir", "timeout_ms", "sandbox", "env_file", "env", "model", "models", "autonomy", "extra_args"},
}

// hasField reports whether kind k has field name; an unknown kind has all.
func hasField(k Kind, name string) bool {
	fs, ok := fieldsOf[k]
	return !ok || slices.Contains(fs, name)
}

func (cfg *Config) check(c *checker) {
	first := map[string]int{}
	for i := range cfg.Adapters {
		p := indexPath("$.adapters", i)
		a := &cfg.Adapters[i]
		a.check(c, p)
		if a.AdapterID == "" {
			continue
		}
		if j, dup := first[a.AdapterID]; dup {
			c.add(p+".adapter_id", "duplicate adapter_id %q (also at $.adapters[%d])", a.AdapterID, j)
		} else {
			first[a.AdapterID] = i
		}
	}
}

func (a *AdapterConfig) check(c *checker, p string) {
	switch {
	case a.AdapterID == "":
		c.add(p+".adapter_id", "required")
	case len(a.AdapterID) > maxIDLen:
		c.add(p+".adapter_id", "longer than %d characters", maxIDLen)
	case !adapterIDPattern().MatchString(a.AdapterID):
		c.add(p+".adapter_id", "%q is not an adapter id: use letters, digits, '_' and '-', in '.'-separated segments", a.AdapterID)
	}
	known := slices.Contains(Kinds, a.Kind)
	switch {
	case a.Kind == "":
		c.add(p+".kind", "required: one of %s", kindList())
	case !known:
		c.add(p+".kind", "unknown kind %q: one of %s", a.Kind, kindList())
	}
	switch {
	case a.TimeoutMS <= 0:
		c.add(p+".timeout_ms", "must be positive")
	case a.TimeoutMS > MaxTimeoutMS:
		c.add(p+".timeout_ms", "must be at most %d (24 hours)", MaxTimeoutMS)
	}
	if !known {
		return
	}

	// Fields this kind does not have (a JSON decode reports them already).
	set := map[string]bool{
		"command": a.Command != "", "working_dir": a.WorkingDir != "", "sandbox": a.Sandbox != "",
		"env_file": a.EnvFile != "", "env": a.Env != nil, "model": a.Model != "", "models": a.Models != nil,
		"provider": a.Provider != nil, "autonomy": a.Autonomy != nil, "extra_args": a.ExtraArgs != nil,
		"endpoint": a.Endpoint != "",
	}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		if set[name] && !hasField(a.Kind, name) {
			c.add(p+"."+name, "not allowed for kind %s", a.Kind)
		}
	}

	if a.Kind.runsCommand() {
		checkPath(c, p+".command", a.Command, true)
		checkPath(c, p+".working_dir", a.WorkingDir, false)
		checkPath(c, p+".env_file", a.EnvFile, false)
		for _, k := range slices.Sorted(maps.Keys(a.Env)) {
			switch v := a.Env[k]; {
			case !envNamePattern().MatchString(k):
				c.add(fieldPath(p+".env", k), "not an environment variable name (letters, digits, '_', not starting with a digit)")
			case strings.ContainsRune(v, 0):
				c.add(fieldPath(p+".env", k), "contains a NUL byte")
			}
		}
		checkArgs(c, p+".extra_args", a.ExtraArgs)
	}

	switch {
	case a.Kind == KindScript:
		if a.Autonomy != nil {
			if a.Autonomy.Profile != ProfileRuntimeNative {
				c.add(p+".autonomy.profile", "must be %q for kind script", ProfileRuntimeNative)
			}
			if a.Autonomy.RequiredArgs != nil {
				c.add(p+".autonomy.required_args", "not allowed for kind script")
			}
			if a.Autonomy.RequiredSettingsFiles != nil {
				c.add(p+".autonomy.required_settings_files", "not allowed for kind script")
			}
		}
	case a.Kind.IsHarness():
		a.checkHarness(c, p)
	}
	// A model goes on a harness's argv: it must not read as a flag.
	if strings.HasPrefix(a.Model, "-") || strings.ContainsRune(a.Model, 0) {
		c.add(p+".model", "must be a model name (not starting with '-')")
	}
	for i, m := range a.Models {
		if m == "" || strings.ContainsRune(m, 0) || strings.HasPrefix(m, "-") {
			c.add(indexPath(p+".models", i), "must be a model name (not empty, not starting with '-')")
		}
	}
	if a.Kind == KindOllamaGenerate {
		checkURL(c, p+".endpoint", a.Endpoint, true)
		if a.Model == "" {
			c.add(p+".model", "required for kind ollama-generate")
		}
	}
}

func (a *AdapterConfig) checkHarness(c *checker, p string) {
	switch a.Sandbox {
	case "", SandboxReadOnly, SandboxWorkspaceWrite, SandboxDangerFullAccess:
	default:
		c.add(p+".sandbox", "unknown sandbox %q: one of read-only, workspace-write, danger-full-access", a.Sandbox)
	}
	for i, arg := range a.ExtraArgs {
		if trustedVMArg().MatchString(arg) {
			c.add(indexPath(p+".extra_args", i), "%q switches the harness's safeguards off: declare it in autonomy.required_args with autonomy.profile %q instead", arg, ProfileTrustedVM)
		}
	}
	if a.Provider != nil {
		if a.Provider.ID == "" {
			c.add(p+".provider.id", "required")
		}
		if a.Provider.WireAPI != "" && a.Provider.WireAPI != "responses" {
			c.add(p+".provider.wire_api", "must be \"responses\"")
		}
		checkURL(c, p+".provider.base_url", a.Provider.BaseURL, false)
	}
	au := a.Autonomy
	if au == nil {
		c.add(p+".autonomy", "required for kind %s: declare autonomy.profile %q or %q", a.Kind, ProfileRestricted, ProfileTrustedVM)
		return
	}
	switch au.Profile {
	case ProfileRestricted:
		if a.Sandbox == SandboxDangerFullAccess {
			c.add(p+".sandbox", "danger-full-access needs autonomy.profile %q", ProfileTrustedVM)
		}
		for i, arg := range au.RequiredArgs {
			if trustedVMArg().MatchString(arg) {
				c.add(indexPath(p+".autonomy.required_args", i), "%q switches the harness's safeguards off, but autonomy.profile is %q", arg, ProfileRestricted)
			}
		}
	case ProfileTrustedVM:
	case "":
		c.add(p+".autonomy.profile", "required: %q or %q", ProfileRestricted, ProfileTrustedVM)
	default:
		c.add(p+".autonomy.profile", "must be %q or %q for kind %s", ProfileRestricted, ProfileTrustedVM, a.Kind)
	}
	checkArgs(c, p+".autonomy.required_args", au.RequiredArgs)
	if au.RequiredSettingsFiles != nil && a.Kind != KindClaudeCode {
		c.add(p+".autonomy.required_settings_files", "not allowed for kind %s", a.Kind)
	}
	for i, f := range au.RequiredSettingsFiles {
		fp := indexPath(p+".autonomy.required_settings_files", i)
		if f == "" {
			c.add(fp, "must not be empty")
			continue
		}
		checkPath(c, fp, f, false)
		if !filepath.IsAbs(f) && a.WorkingDir == "" {
			c.add(fp, "a relative path needs working_dir (it is relative to it)")
		}
	}
}

func checkPath(c *checker, p, v string, required bool) {
	switch {
	case v == "" && required:
		c.add(p, "required")
	case strings.ContainsRune(v, 0):
		c.add(p, "contains a NUL byte")
	case strings.HasPrefix(v, "~"):
		c.add(p, "%q: '~' is not expanded; use an absolute path", v)
	}
}

func checkArgs(c *checker, p string, args []string) {
	for i, arg := range args {
		if strings.ContainsRune(arg, 0) {
			c.add(indexPath(p, i), "contains a NUL byte")
		}
	}
}

func checkURL(c *checker, p, v string, required bool) {
	if v == "" {
		if required {
			c.add(p, "required")
		}
		return
	}
	u, err := url.Parse(v)
	switch {
	case err != nil:
		c.add(p, "not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		c.add(p, "%q: must be an http or https URL", v)
	case u.Host == "":
		c.add(p, "%q: has no host", v)
	case u.User != nil:
		c.add(p, "credentials in the URL are not allowed (they would be recorded as evidence)")
	case u.RawQuery != "" || u.Fragment != "":
		c.add(p, "%q: must not have a query or fragment", v)
	}
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// resolve makes relative command (with a slash), working_dir and env_file
// paths absolute against dir.
func (cfg *Config) resolve(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for i := range cfg.Adapters {
		a := &cfg.Adapters[i]
		if strings.ContainsRune(a.Command, '/') {
			a.Command = abs(a.Command)
		}
		a.WorkingDir = abs(a.WorkingDir)
		a.EnvFile = abs(a.EnvFile)
	}
}

// clone returns a deep copy of a.
func (a AdapterConfig) clone() AdapterConfig {
	a.Env = maps.Clone(a.Env)
	a.ExtraArgs = slices.Clone(a.ExtraArgs)
	a.Models = slices.Clone(a.Models)
	if a.Provider != nil {
		p := *a.Provider
		if p.RequiresOpenAIAuth != nil {
			b := *p.RequiresOpenAIAuth
			p.RequiresOpenAIAuth = &b
		}
		a.Provider = &p
	}
	if a.Autonomy != nil {
		au := *a.Autonomy
		au.RequiredArgs = slices.Clone(au.RequiredArgs)
		au.RequiredSettingsFiles = slices.Clone(au.RequiredSettingsFiles)
		a.Autonomy = &au
	}
	return a
}

// Offers reports whether the adapter offers model: its default model or
// one of its models. A script adapter offers none.
func (a *AdapterConfig) Offers(model string) bool {
	return model != "" && (model == a.Model || slices.Contains(a.Models, model))
}

// OfferedModels is the default model then the others.
func (a *AdapterConfig) OfferedModels() []string {
	var out []string
	if a.Model != "" {
		out = append(out, a.Model)
	}
	return append(out, a.Models...)
}
