package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/spf13/cobra"

	"github.com/packrun/packrun/abi/guest"
	"github.com/packrun/packrun/packs"
)

// templateFS holds the project templates: templates/<lang>/ for each
// language and templates/common/ for what they share. Every file is a
// text/template with {% %} delimiters (so C, Rust, shell and JSON braces need
// no escaping); a ".tmpl" suffix is dropped from the output name.
//
//go:embed templates
var templateFS embed.FS

// initLang describes one language packrun init scaffolds.
type initLang struct {
	title string
	// behaviour, first and second describe the node in the README (what it
	// does, and its output for {"name":"x"} the first and second time).
	behaviour     string
	first, second string
	// inputSchema and outputSchema go into pack.json.
	inputSchema, outputSchema string
	// export names the function serving the node of an Extism plugin.
	export string
}

const (
	counterInput = `{"type":"object","properties":{"name":{"type":"string",` +
		`"description":"whose count to increase (default \"world\")"}}}`
	counterOutput = `{"type":"object","required":["name","count"],` +
		`"properties":{"name":{"type":"string"},"count":{"type":"integer","minimum":1}}}`
	counterBehaviour = "`{\"name\":\"x\"}` → `{\"name\":\"x\",\"count\":n}`, where n counts the calls for that name (`name` defaults to `world`)."
)

var initLangs = map[string]initLang{
	"c": {
		title: "C", behaviour: counterBehaviour,
		first: `{"name":"x","count":1}`, second: `{"name":"x","count":2}`,
		inputSchema: counterInput, outputSchema: counterOutput,
	},
	"go": {
		title: "Go", behaviour: counterBehaviour,
		first: `{"name":"x","count":1}`, second: `{"name":"x","count":2}`,
		inputSchema: counterInput, outputSchema: counterOutput,
	},
	"rust": {
		title: "Rust", behaviour: counterBehaviour,
		first: `{"name":"x","count":1}`, second: `{"name":"x","count":2}`,
		inputSchema: counterInput, outputSchema: counterOutput,
	},
	"assemblyscript": {
		title: "AssemblyScript", behaviour: counterBehaviour,
		first: `{"name":"x","count":1}`, second: `{"name":"x","count":2}`,
		inputSchema: counterInput, outputSchema: counterOutput,
	},
	"extism-go": {
		title: "Go (an Extism plugin, Extism Go PDK)", behaviour: counterBehaviour,
		first: `{"count":1,"name":"x"}`, second: `{"count":2,"name":"x"}`,
		inputSchema: counterInput, outputSchema: counterOutput,
		export: "count",
	},
	"wat": {
		title:     "WebAssembly text (WAT)",
		behaviour: "it ignores its input and returns `{\"count\":n}`, where n counts every call.",
		first:     `{"count":1}`, second: `{"count":2}`,
		inputSchema: `{"type":"object","description":"ignored: every call shares one count"}`,
		outputSchema: `{"type":"object","required":["count"],` +
			`"properties":{"count":{"type":"integer","minimum":1}}}`,
	},
}

func initLangList() string {
	names := make([]string, 0, len(initLangs))
	for n := range initLangs {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// initData is what the templates see.
type initData struct {
	Name, Version      string
	Short              string // the last segment of Name
	NodeID, TaskType   string
	Module             string // Go module path
	Namespace          string // trust pattern covering Name, e.g. local.*
	LangTitle          string
	Behaviour          string
	FirstOutput        string
	SecondOutput       string
	NameLen, NodeIDLen int
	SDKVersion         string // guest.Version
	// MemNamespace is the memory namespace the counter uses: the pack's
	// name, so that two scaffolds never share counts. The Wat* fields are
	// the lengths of the WAT template's memory requests that embed it.
	MemNamespace                        string
	WatGetLen, WatPutHeadLen, WatPutLen int
}

const initVersion = "0.1.0"

// sampleInputName is the project file holding the input packrun dev runs
// the node on.
const sampleInputName = "sample.json"

func (a *app) initCommand() *cobra.Command {
	var lang, name string
	cmd := &cobra.Command{
		Use:   "init [LANG] DIR [--lang go|c|rust|assemblyscript|wat|extism-go] [--name NAME]",
		Short: "Create a pack project: a counter skill, its manifest, the SDK and a build script",
		Long: `Create a new pack project in DIR (which must not exist or be empty): pack.json,
a counter skill that uses memory (get, put with a TTL) and logs, the guest SDK
package it depends on in sdk/<lang>/ (so the project builds offline and anywhere;
packrun sdk upgrade DIR replaces it), build.sh producing node.wasm,
a README (build, sign, install, invoke) and a .gitignore.

The pack name defaults to local.<DIR's base name>; the node is <short>.counter,
serving task type <short>.count, where <short> is the name's last segment. The
manifest grants the memory service and a memory namespace named like the pack
(so two projects never share counts). sample.json is the input packrun dev runs
the node on. Build the project with packrun build DIR, or build, sign, install
and run it on every save with packrun dev in DIR.

"packrun init LANG DIR" is the same as "packrun init DIR --lang LANG".`,
		Example: `  packrun init c hello && cd hello && packrun dev
  packrun init hello --lang c
  packrun init thing --lang rust --name vendor.acme.thing && packrun build thing`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			if len(args) == 2 {
				if lang != "" {
					return usageError("init %s %s: give the language once (LANG DIR, or DIR --lang LANG)", args[0], args[1])
				}
				lang, dir = args[0], args[1]
			}
			return a.initProject(dir, lang, name)
		},
	}
	cmd.Flags().StringVar(&lang, "lang", "", "language: "+initLangList())
	cmd.Flags().StringVar(&name, "name", "", "pack name (default local.<DIR's base name>)")
	return cmd
}

func (a *app) initProject(dir, lang, name string) error {
	lang = strings.ToLower(strings.TrimSpace(lang))
	spec, ok := initLangs[lang]
	switch {
	case lang == "":
		return usageError("init needs --lang (%s)", initLangList())
	case !ok && strings.HasPrefix(lang, "extism"):
		return usageError("--lang %s: packrun init scaffolds Extism plugin packs only with the Go PDK (--lang extism-go); see examples/extism-as for the AssemblyScript PDK", lang)
	case !ok:
		return usageError("--lang %q: unknown language; want one of %s", lang, initLangList())
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if name == "" {
		name = defaultPackName(filepath.Base(abs))
	}
	m := counterManifest(name, spec)
	if err := m.Validate(); err != nil {
		return usageError("pack name %q (set it with --name): %v", name, err)
	}
	if err := checkInitDir(dir); err != nil {
		return err
	}
	files, err := renderProject(lang, spec, m)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return err
		}
	}
	fmt.Fprintf(a.stdout, "created %s: %s pack %s, node %s (%d files)\nnext: cd %s && packrun dev   (or: packrun build %s)\n",
		dir, spec.title, name, m.Nodes[0].TypeID, len(files), dir, dir)
	return nil
}

// checkInitDir refuses a DIR that exists and is not an empty directory.
func checkInitDir(dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return usageError("%s exists and is not a directory", dir)
	}
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err == nil {
		return usageError("%s is not empty; packrun init needs a new or empty directory", dir)
	} else if err != io.EOF {
		return err
	}
	return nil
}

// defaultPackName makes local.<base> from a directory name: lower case,
// segments of a-z, 0-9 and '-' (anything else becomes '-'), split at dots.
func defaultPackName(base string) string {
	var segs []string
	for _, s := range strings.Split(strings.ToLower(base), ".") {
		var b strings.Builder
		dash := false
		for _, r := range s {
			if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
				b.WriteRune(r)
				dash = false
			} else if !dash {
				b.WriteByte('-')
				dash = true
			}
		}
		if seg := strings.Trim(b.String(), "-"); seg != "" {
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		segs = []string{"pack"}
	}
	return "local." + strings.Join(segs, ".")
}

func shortName(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// counterManifest is the manifest of a new project; the module's sha256 is a
// placeholder (zeros) until packrun build fills it in.
func counterManifest(name string, spec initLang) *packs.Manifest {
	short := shortName(name)
	return &packs.Manifest{
		Name:        name,
		Version:     initVersion,
		Description: fmt.Sprintf("Counter skill in %s, scaffolded by packrun init: counts calls in memory namespace %q.", spec.title, name),
		Runtime: packs.Runtime{
			Language: "wasm",
			ABI:      packs.ABIRequirement{Version: 1, Minor: 0},
			Modules:  []packs.Module{{Path: "node.wasm", SHA256: strings.Repeat("0", 64)}},
		},
		Nodes: []packs.Node{{
			TypeID:       short + ".counter",
			Kind:         packs.KindSkill,
			Description:  "Increases a counter kept in memory (one-hour TTL) and returns it; logs the new value.",
			InputSchema:  json.RawMessage(spec.inputSchema),
			OutputSchema: json.RawMessage(spec.outputSchema),
			TaskTypes:    []string{short + ".count"},
			Export:       spec.export,
		}},
		Grants: packs.Grants{
			Services:         []packs.Service{packs.ServiceMemory},
			MemoryNamespaces: []string{name},
		},
	}
}

type projectFile struct {
	path string // slash-separated, relative to the project
	data []byte
	mode fs.FileMode
}

// renderProject returns every file of a new project, sorted by path.
func renderProject(lang string, spec initLang, m *packs.Manifest) ([]projectFile, error) {
	node := m.Nodes[0]
	ns := m.Name[:strings.LastIndexByte(m.Name, '.')] + ".*"
	data := initData{
		Name: m.Name, Version: m.Version, Short: shortName(m.Name),
		NodeID: node.TypeID, TaskType: node.TaskTypes[0],
		Module: m.Name, Namespace: ns,
		LangTitle: spec.title, Behaviour: spec.behaviour,
		FirstOutput: spec.first, SecondOutput: spec.second,
		NameLen: len(m.Name), NodeIDLen: len(node.TypeID),
		SDKVersion:   guest.Version,
		MemNamespace: m.Grants.MemoryNamespaces[0],
	}
	n := len(data.MemNamespace)
	data.WatGetLen, data.WatPutHeadLen, data.WatPutLen = 32+n, 40+n, 59+n
	var files []projectFile

	var manifest bytes.Buffer
	enc := json.NewEncoder(&manifest)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	if _, err := packs.DecodeManifest(manifest.Bytes()); err != nil {
		return nil, fmt.Errorf("init: generated pack.json is invalid: %w", err)
	}
	files = append(files, projectFile{packs.ManifestName, manifest.Bytes(), 0o644})

	base, err := template.New("common").Delims("{%", "%}").Option("missingkey=error").
		ParseFS(templateFS, "templates/common/readme.tmpl")
	if err != nil {
		return nil, err
	}
	render := func(src, dst string) error {
		text, err := fs.ReadFile(templateFS, src)
		if err != nil {
			return err
		}
		t, err := base.Clone()
		if err != nil {
			return err
		}
		if t, err = t.New(src).Parse(string(text)); err != nil {
			return err
		}
		var out bytes.Buffer
		if err := t.Execute(&out, data); err != nil {
			return err
		}
		mode := fs.FileMode(0o644)
		if path.Base(dst) == "build.sh" {
			mode = 0o755
		}
		files = append(files, projectFile{dst, out.Bytes(), mode})
		return nil
	}
	if err := render("templates/common/gitignore.tmpl", ".gitignore"); err != nil {
		return nil, err
	}
	files = append(files, projectFile{sampleInputName, []byte(`{"name":"world"}` + "\n"), 0o644})
	root := "templates/" + lang
	err = fs.WalkDir(templateFS, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return render(p, strings.TrimSuffix(strings.TrimPrefix(p, root+"/"), ".tmpl"))
	})
	if err != nil {
		return nil, err
	}
	sdk, err := sdkPackageFiles(lang)
	if err != nil {
		return nil, err
	}
	files = append(files, sdk...)
	slices.SortFunc(files, func(x, y projectFile) int { return strings.Compare(x.path, y.path) })
	for i := 1; i < len(files); i++ {
		if files[i].path == files[i-1].path {
			return nil, fmt.Errorf("init: %s is produced twice", files[i].path)
		}
	}
	return files, nil
}

// ---------------------------------------------------------------- build

func (a *app) buildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build DIR",
		Short: "Run DIR/build.sh, record the modules' sha256 in pack.json and pack DIR/dist/<name>-<version>.pack",
		Long: `Build a pack project (see packrun init): run DIR/build.sh with bash in DIR (its
output goes to stderr), write the sha256 of every module listed in pack.json into
pack.json (changing nothing else), then pack the directory like packrun pack and
print the path of DIR/dist/<name>-<version>.pack.`,
		Example: "  packrun build hello && packrun sign hello/dist/local.hello-0.1.0.pack --key acme.key",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := a.buildProject(cmd.Context(), args[0], a.stderr)
			if err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, out)
			return nil
		},
	}
}

// buildProject runs dir/build.sh (its output goes to buildOut), records the
// modules' sha256 in pack.json and packs dir/dist/<name>-<version>.pack,
// whose path it returns. A failing build.sh is an *buildError.
func (a *app) buildProject(ctx context.Context, dir string, buildOut io.Writer) (string, error) {
	if err := checkProjectDir(dir); err != nil {
		return "", err
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return "", fmt.Errorf("build: bash not found: %w", err)
	}
	a.log.Info("running build.sh", "dir", dir)
	run := exec.CommandContext(ctx, bash, "build.sh")
	run.Dir = dir
	run.Stdout, run.Stderr = buildOut, buildOut
	if err := run.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			return "", &buildError{fmt.Errorf("build: %s failed with exit status %d", filepath.Join(dir, "build.sh"), ee.ExitCode())}
		}
		return "", &buildError{fmt.Errorf("build: %s failed: %v", filepath.Join(dir, "build.sh"), err)}
	}
	if err := a.updateModuleDigests(dir); err != nil {
		return "", err
	}
	return writePack(dir)
}

// buildError is a project's build.sh failing.
type buildError struct{ err error }

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

// checkProjectDir refuses a directory that is not a pack project.
func checkProjectDir(dir string) error {
	for _, f := range []string{"build.sh", packs.ManifestName} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || !fi.Mode().IsRegular() {
			return usageError("%s has no %s (packrun init creates a project)", dir, f)
		}
	}
	return nil
}

// writePack packs dir into dir/dist/<name>-<version>.pack and returns the path.
func writePack(dir string) (string, error) {
	src, err := packs.Collect(dir)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := src.WriteTo(&buf); err != nil {
		return "", err
	}
	if _, err := packs.Read(bytes.NewReader(buf.Bytes()), packs.DefaultLimits()); err != nil {
		return "", err
	}
	m := src.Manifest
	out := filepath.Join(dir, "dist", m.Name+"-"+m.Version+".pack")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
		return "", err
	}
	return out, nil
}

// updateModuleDigests sets the sha256 of every module listed in dir's
// pack.json to the digest of the file. The manifest is patched in place:
// only the "sha256" values change (one is added to a module that has none),
// so key order, formatting and everything else stay as written.
func (a *app) updateModuleDigests(dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	fi, err := root.Stat(packs.ManifestName)
	if err != nil {
		return err
	}
	if fi.Size() > packs.DefaultLimits().ManifestBytes {
		return withCode(exitRefused, fmt.Errorf("refused: %s: %d bytes, more than the %d allowed", packs.ManifestName, fi.Size(), packs.DefaultLimits().ManifestBytes))
	}
	b, err := root.ReadFile(packs.ManifestName)
	if err != nil {
		return err
	}
	mods, err := locateModules(b)
	if err != nil {
		return withCode(exitRefused, fmt.Errorf("refused: %s: %v", filepath.Join(dir, packs.ManifestName), err))
	}
	type edit struct {
		at, end int64
		text    string
	}
	var edits []edit
	for _, mod := range mods {
		if mod.path == "" {
			continue // no usable path: packs.Collect reports it
		}
		data, err := root.ReadFile(mod.path)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("build: build.sh did not produce %s, listed in %s", filepath.Join(dir, filepath.FromSlash(mod.path)), packs.ManifestName)
		}
		if err != nil {
			return fmt.Errorf("build: module %s: %w", mod.path, err)
		}
		sum := sha256.Sum256(data)
		digest := `"` + hex.EncodeToString(sum[:]) + `"`
		a.log.Info("module built", "path", mod.path, "sha256", hex.EncodeToString(sum[:]), "bytes", len(data))
		if len(mod.sha) == 0 {
			sep := ", "
			if mod.members == 0 {
				sep = ""
			}
			edits = append(edits, edit{mod.closeAt, mod.closeAt, sep + `"sha256": ` + digest})
		}
		for _, s := range mod.sha {
			edits = append(edits, edit{s[0], s[1], digest})
		}
	}
	slices.SortFunc(edits, func(x, y edit) int { return int(y.at - x.at) })
	patched := bytes.Clone(b)
	for _, e := range edits {
		patched = slices.Concat(patched[:e.at], []byte(e.text), patched[e.end:])
	}
	if bytes.Equal(patched, b) {
		return nil
	}
	return root.WriteFile(packs.ManifestName, patched, fi.Mode().Perm())
}

// moduleLoc is where one entry of runtime.modules sits in pack.json.
type moduleLoc struct {
	path    string     // "" when absent or not a string
	sha     [][2]int64 // byte spans of the "sha256" string values, quotes included
	closeAt int64      // offset of the object's closing brace
	members int
}

// locateModules finds the entries of runtime.modules in a manifest with a
// streaming decoder, recording byte offsets instead of decoding. Values of
// unexpected types are skipped (packs.Collect reports them afterwards).
func locateModules(b []byte) ([]moduleLoc, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var mods []moduleLoc
	_, err := jsonMembers(dec, func(key string) error {
		if key != "runtime" {
			return jsonSkip(dec)
		}
		_, err := jsonMembers(dec, func(key string) error {
			if key != "modules" {
				return jsonSkip(dec)
			}
			return jsonElements(dec, func() error {
				mod := moduleLoc{}
				isObject, err := jsonMembers(dec, func(key string) error {
					mod.members++
					start := dec.InputOffset()
					t, err := dec.Token()
					if err != nil {
						return err
					}
					s, isString := t.(string)
					switch {
					case !isString:
						return jsonSkipRest(dec, t)
					case key == "path":
						mod.path = s
					case key == "sha256":
						end := dec.InputOffset()
						q := bytes.IndexByte(b[start:end], '"')
						if q < 0 {
							return fmt.Errorf("cannot locate the sha256 value at offset %d", start)
						}
						mod.sha = append(mod.sha, [2]int64{start + int64(q), end})
					}
					return nil
				})
				if err != nil || !isObject {
					return err
				}
				mod.closeAt = dec.InputOffset() - 1
				mods = append(mods, mod)
				return nil
			})
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the top-level value")
	}
	return mods, nil
}

// jsonMembers reads an object, calling fn after each key; fn consumes the
// value. A value that is not an object is skipped and reported as false.
func jsonMembers(dec *json.Decoder, fn func(key string) error) (bool, error) {
	t, err := dec.Token()
	if err != nil {
		return false, err
	}
	if t != json.Delim('{') {
		return false, jsonSkipRest(dec, t)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return true, err
		}
		if err := fn(k.(string)); err != nil {
			return true, err
		}
	}
	_, err = dec.Token()
	return true, err
}

// jsonElements reads an array, calling fn for each element; fn consumes it.
// A value that is not an array is skipped.
func jsonElements(dec *json.Decoder, fn func() error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('[') {
		return jsonSkipRest(dec, t)
	}
	for dec.More() {
		if err := fn(); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

func jsonSkip(dec *json.Decoder) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	return jsonSkipRest(dec, t)
}

// jsonSkipRest consumes the rest of a value whose first token was t.
func jsonSkipRest(dec *json.Decoder, t json.Token) error {
	if d, ok := t.(json.Delim); !ok || (d != '{' && d != '[') {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}
