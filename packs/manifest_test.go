package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

const sum0 = "0000000000000000000000000000000000000000000000000000000000000000"

// valid is a small valid manifest the cases below vary.
const valid = `{
  "name": "vendor.acme.hello",
  "version": "1.2.3",
  "runtime": {"language": "wasm", "abi": {"version": 1, "minor": 0},
              "modules": [{"path": "hello.wasm", "sha256": "` + sum0 + `"}]},
  "nodes": [{"typeId": "example.hello", "kind": "node"}]
}`

// noLoader refuses every external reference, for the reference compiler.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed", url)
}

func compilePackSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// schemaAccepts reports whether the published schema accepts b.
func schemaAccepts(s *jsonschema.Schema, b []byte) bool {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	return err == nil && s.Validate(doc) == nil
}

func TestExamples(t *testing.T) {
	schema := compilePackSchema(t)
	manifests, _ := filepath.Glob("../examples/*/pack.json")
	if len(manifests) < 4 {
		t.Fatalf("found %d example manifests, want at least 4", len(manifests))
	}
	for _, path := range manifests {
		dir := filepath.Dir(path)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(doc); err != nil {
				t.Errorf("schema: %v", err)
			}
			m, err := DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			// The hello examples' names match their modules' openwop_pack_name.
			if base := filepath.Base(dir); strings.HasPrefix(base, "hello-") {
				if want := "local.hello." + strings.TrimPrefix(base, "hello-"); m.Name != want {
					t.Errorf("name %s, want %s", m.Name, want)
				}
			}
			// The module digests are checked by packing the example directory.
			a, err := Pack(dir)
			if err != nil {
				t.Fatalf("pack: %v (rebuilt hello.wasm? update its sha256 in pack.json)", err)
			}
			got, err := Read(bytes.NewReader(a), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Files) != 1+len(m.Runtime.Modules) || len(got.Manifest.Nodes) != len(m.Nodes) {
				t.Errorf("files %v", paths(got.Files))
			}
		})
	}
}

func paths(fs []File) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Path)
	}
	return out
}

func TestDecodeManifestValid(t *testing.T) {
	schema := compilePackSchema(t)
	for _, tc := range []struct{ name, json string }{
		{"minimal", valid},
		{"everything", `{
		  "name": "community.ada.tools.text", "version": "0.1.0-rc.1+build.5",
		  "description": "Text tools ✓", "license": "MIT",
		  "runtime": {"language": "wasm", "abi": {"version": 1, "minor": 0},
		    "modules": [{"path": "a.wasm", "sha256": "` + sum0 + `"}, {"path": "lib/b.wasm", "sha256": "` + sum0 + `"}],
		    "limits": {"memoryPages": 256, "timeoutMs": 5000, "outputBytes": 1048576, "hostCalls": 100000}},
		  "nodes": [
		    {"typeId": "text.upper", "kind": "skill", "module": "a.wasm", "taskTypes": ["upper", "text.upper"],
		     "inputSchema": {"type": "object", "properties": {"s": {"type": "string"}}, "$defs": {"x": {"$ref": "#/properties/s"}}},
		     "outputSchema": true},
		    {"typeId": "text.watch", "kind": "sensor", "module": "lib/b.wasm",
		     "inputSchema": {"$schema": "https://json-schema.org/draft/2020-12/schema"}},
		    {"typeId": "core.conversationGate", "kind": "node", "module": "a.wasm", "description": ""}],
		  "grants": {"services": ["memory", "queue", "adapters", "evidence", "artifacts", "config", "messages", "sensors"],
		    "adapters": ["http", "slack.post"], "memoryNamespaces": ["notes"]}
		}`},
		{"messages", strings.Replace(valid, `"nodes": [{"typeId": "example.hello", "kind": "node"}]`,
			`"nodes": [{"typeId": "example.hello", "kind": "skill", "taskTypes": ["t"], "subscribes": ["crisis.*", "ops.alert", "ops.disk.*"]}],
			 "grants": {"services": ["messages"], "topics": ["crisis.*", "ops.*"]}`, 1)},
		{"subscribing to everything", strings.Replace(valid, `"nodes": [{"typeId": "example.hello", "kind": "node"}]`,
			`"nodes": [{"typeId": "example.hello", "kind": "node", "subscribes": ["*", "crisis.detection"]}],
			 "grants": {"services": ["messages"], "topics": ["*"]}`, 1)},
		{"integral floats", strings.Replace(valid, `"minor": 0`, `"minor": 0.0`, 1)},
		{"empty task types on a node", strings.Replace(valid, `"kind": "node"`, `"kind": "node", "taskTypes": []`, 1)},
		{"local with more segments", strings.Replace(valid, "vendor.acme.hello", "local.a.b-c.d9", 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeManifest([]byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("Validate after decode: %v", err)
			}
			if !schemaAccepts(schema, []byte(tc.json)) {
				t.Error("the published schema refuses it")
			}
			// Encoding a decoded manifest gives one that decodes the same.
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := DecodeManifest(b)
			if err != nil {
				t.Fatalf("re-decode %s: %v", b, err)
			}
			b2, _ := json.Marshal(m2)
			if !bytes.Equal(b, b2) {
				t.Errorf("round trip:\n%s\n%s", b, b2)
			}
		})
	}
}

func TestDecodeManifestInvalid(t *testing.T) {
	schema := compilePackSchema(t)
	// r replaces old with new in valid, for each pair.
	r := func(oldNew ...string) string { return strings.NewReplacer(oldNew...).Replace(valid) }
	module0 := `[{"path": "hello.wasm", "sha256": "` + sum0 + `"}]`
	node0 := `[{"typeId": "example.hello", "kind": "node"}]`
	for _, tc := range []struct {
		name string
		json string
		want []string // problem paths, in order
		// schema: the published schema refuses it too (false where the rule
		// spans fields or depends on the host).
		schema bool
	}{
		{"not JSON", `{"name":`, []string{"$"}, true},
		{"not UTF-8", "{\"name\": \"\xff\"}", []string{"$"}, true},
		{"not an object", `[]`, []string{"$"}, true},
		{"trailing data", valid + ` {}`, []string{"$"}, true},
		{"empty object", `{}`, []string{"$.name", "$.version", "$.runtime", "$.nodes"}, true},
		{"wrong types", `{"name": 5, "version": null, "description": [], "runtime": "wasm", "nodes": {}, "grants": {"services": "memory"}}`,
			[]string{"$.name", "$.version", "$.description", "$.runtime", "$.nodes", "$.grants.services"}, true},
		{"many problems at once", `{
		  "name": "Vendor.acme", "version": "v1.2", "extra": 1,
		  "runtime": {"language": "js", "abi": {"version": 1, "minor": -1},
		    "modules": [{"path": "hello.wasm", "sha256": "ABC", "size": 3}]},
		  "nodes": [{"typeId": "a b", "kind": "widget"}],
		  "grants": {"services": ["network"]}}`,
			[]string{"$.extra", "$.runtime.abi.minor", "$.runtime.modules[0].size", "$.name", "$.version",
				"$.runtime.language", "$.runtime.modules[0].sha256", "$.nodes[0].typeId", "$.nodes[0].kind", "$.grants.services[0]"}, true},
		{"duplicate key", r(`"version": "1.2.3",`, `"version": "1.2.3", "version": "1.2.4",`), []string{"$.version"}, false},
		{"missing nested fields", `{"name": "local.x", "version": "1.0.0", "runtime": {"abi": {}, "modules": [{}]}, "nodes": [{}]}`,
			[]string{"$.runtime.language", "$.runtime.abi.version", "$.runtime.abi.minor", "$.runtime.modules[0].path",
				"$.runtime.modules[0].sha256", "$.nodes[0].typeId", "$.nodes[0].kind"}, true},
		{"empty lists", r(module0, `[]`, node0, `[]`),
			[]string{"$.runtime.modules", "$.nodes"}, true},
		{"ABI not served", r(`"version": 1,`, `"version": 7,`), []string{"$.runtime.abi.version"}, false},
		{"ABI zero", r(`"version": 1,`, `"version": 0,`), []string{"$.runtime.abi.version"}, true},
		{"bad names", r("vendor.acme.hello", "vendor.acme"), []string{"$.name"}, true},
		{"name with capitals", r("vendor.acme.hello", "local.Hello"), []string{"$.name"}, true},
		{"name too long", r("vendor.acme.hello", "local."+strings.Repeat("a", 128)), []string{"$.name"}, true},
		{"unknown tier", r("vendor.acme.hello", "core.acme.hello"), []string{"$.name"}, true},
		{"semver without patch", r(`"1.2.3"`, `"1.2"`), []string{"$.version"}, true},
		{"semver leading zero", r(`"1.2.3"`, `"01.2.3"`), []string{"$.version"}, true},
		{"semver empty pre-release", r(`"1.2.3"`, `"1.2.3-"`), []string{"$.version"}, true},
		{"description too long", r(`"version": "1.2.3",`, `"version": "1.2.3", "license": "`+strings.Repeat("é", 1025)+`",`), []string{"$.license"}, true},
		{"module paths", r(module0, `[
		  {"path": "../x.wasm", "sha256": "`+sum0+`"}, {"path": "/abs.wasm", "sha256": "`+sum0+`"},
		  {"path": "a\\b.wasm", "sha256": "`+sum0+`"}, {"path": "./m.wasm", "sha256": "`+sum0+`"},
		  {"path": "pack.json", "sha256": "`+sum0+`"}, {"path": "m.wasm", "sha256": "`+sum0+`"},
		  {"path": "M.wasm", "sha256": "`+sum0+`"}, {"path": "", "sha256": "`+sum0+`"}, {"path": "a//b", "sha256": "`+sum0+`"}]`),
			[]string{"$.runtime.modules[0].path", "$.runtime.modules[1].path", "$.runtime.modules[2].path", "$.runtime.modules[3].path",
				"$.runtime.modules[4].path", "$.runtime.modules[6].path", "$.runtime.modules[7].path", "$.runtime.modules[8].path",
				"$.nodes[0].module"}, false},
		{"module references", r(module0, `[{"path": "a.wasm", "sha256": "`+sum0+`"}, {"path": "b.wasm", "sha256": "`+sum0+`"}]`,
			node0, `[{"typeId": "a", "kind": "node"}, {"typeId": "b", "kind": "node", "module": "c.wasm"}, {"typeId": "c", "kind": "node", "module": ""}]`),
			[]string{"$.nodes[2].module", "$.nodes[0].module", "$.nodes[1].module"}, false},
		{"typeIds", r(node0,
			`[{"typeId": "x", "kind": "node"}, {"typeId": "x", "kind": "sensor"}, {"typeId": ".x", "kind": "node"}, {"typeId": "", "kind": "node"}]`),
			[]string{"$.nodes[1].typeId", "$.nodes[2].typeId", "$.nodes[3].typeId"}, false},
		{"task types", r(node0,
			`[{"typeId": "a", "kind": "skill", "taskTypes": ["t1", "t2"]}, {"typeId": "b", "kind": "skill", "taskTypes": ["t2"]},
			  {"typeId": "c", "kind": "skill"}, {"typeId": "d", "kind": "sensor", "taskTypes": ["t3"]},
			  {"typeId": "e", "kind": "skill", "taskTypes": ["bad type", "t4", "t4"]}, {"typeId": "f", "kind": "skill", "taskTypes": [1]}]`),
			[]string{"$.nodes[5].taskTypes[0]", "$.nodes[1].taskTypes[0]", "$.nodes[2].taskTypes", "$.nodes[3].taskTypes",
				"$.nodes[4].taskTypes[0]", "$.nodes[4].taskTypes[2]"}, true},
		{"cadence", r(node0,
			`[{"typeId": "a", "kind": "sensor", "cadence": "5m"}, {"typeId": "b", "kind": "node", "cadence": "5m"},
			  {"typeId": "c", "kind": "sensor", "cadence": "1.5s"}, {"typeId": "d", "kind": "sensor", "cadence": "0s"}]`),
			[]string{"$.nodes[1].cadence", "$.nodes[2].cadence", "$.nodes[3].cadence"}, false},
		{"limits", r(`"minor": 0},`, `"minor": 0}, "limits": {"memoryPages": 65537, "timeoutMs": 0, "outputBytes": -5, "hostCalls": 1.5, "cpu": 1},`),
			[]string{"$.runtime.limits.cpu", "$.runtime.limits.memoryPages", "$.runtime.limits.timeoutMs", "$.runtime.limits.outputBytes",
				"$.runtime.limits.hostCalls"}, true},
		{"limit as string", r(`"minor": 0},`, `"minor": 0}, "limits": {"memoryPages": "1"},`), []string{"$.runtime.limits.memoryPages"}, true},
		{"huge integer", r(`"minor": 0},`, `"minor": 0}, "limits": {"hostCalls": 1e300},`), []string{"$.runtime.limits.hostCalls"}, true},
		{"schemas", r(`"kind": "node"}`, `"kind": "node", "inputSchema": "string", "outputSchema": {"type": 5}}, {"typeId": "b", "kind": "node",
			"inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#"}, "outputSchema": {"$ref": "https://example.com/s.json"}}, {"typeId": "c", "kind": "node", "inputSchema": null}`),
			[]string{"$.nodes[0].inputSchema", "$.nodes[2].inputSchema", "$.nodes[0].outputSchema", "$.nodes[1].inputSchema", "$.nodes[1].outputSchema"}, true},
		{"grants", r(`"nodes":`, `"grants": {"services": ["queue", "queue", "network"], "adapters": ["http", "http", "bad name"], "memoryNamespaces": ["n"], "files": []}, "nodes":`),
			[]string{"$.grants.files", "$.grants.services[1]", "$.grants.services[2]", "$.grants.adapters[1]", "$.grants.adapters[2]",
				"$.grants.adapters", "$.grants.memoryNamespaces"}, true},
		{"grants needing a service", r(`"nodes":`, `"grants": {"adapters": ["http"], "memoryNamespaces": ["n"]}, "nodes":`),
			[]string{"$.grants.adapters", "$.grants.memoryNamespaces"}, false},
		{"topics needing the messages service", r(`"nodes":`, `"grants": {"topics": ["crisis.*"]}, "nodes":`),
			[]string{"$.grants.topics"}, false},
		{"bad topic patterns", r(`"nodes":`, `"grants": {"services": ["messages"], "topics": ["crisis.*", "crisis.*", "a..b", "a.*.b", "", "*.x"]}, "nodes":`),
			[]string{"$.grants.topics[1]", "$.grants.topics[2]", "$.grants.topics[3]", "$.grants.topics[4]", "$.grants.topics[5]"}, true},
		{"http grants", r(`"nodes":`, `"grants": {"http": [
			  {"scheme": "ftp", "host": "api.example.com/v1"}, {"host": "api.example.com:8443"}, {"host": "a.*.example.com"},
			  {"host": "*.com"}, {"host": "Api.Example.com"}, {"host": "[::1"}, {"host": "x.example", "port": 70000}, {"port": 1}]}, "nodes":`),
			[]string{"$.grants.http[6].port", "$.grants.http[7].host", "$.grants.http[0].scheme", "$.grants.http[0].host", "$.grants.http[1].host",
				"$.grants.http[2].host", "$.grants.http[3].host", "$.grants.http[4].host", "$.grants.http[5].host"}, false},
		{"http grant methods, ranges, secrets", r(`"nodes":`, `"grants": {"http": [
			  {"host": "x.example", "methods": ["GET", "GE T", "get", "GET"]}, {"host": "x.example", "allowRanges": ["loopback", "metadata"]},
			  {"host": "x.example", "secrets": [{"name": "tok", "bearer": true, "header": "X-Key"}, {"name": "tok"}, {"name": "t", "header": "Host"}]},
			  {"host": "x.example", "pathPrefix": "v1/../x"}]}, "nodes":`),
			[]string{"$.grants.http[0].methods[1]", "$.grants.http[0].methods[2]", "$.grants.http[0].methods[3]", "$.grants.http[1].allowRanges[1]",
				"$.grants.http[2].secrets[0]", "$.grants.http[2].secrets[1]", "$.grants.http[2].secrets[2].header", "$.grants.http[3].pathPrefix"}, false},
		{"subscriptions outside the grant", r(node0,
			`[{"typeId": "a", "kind": "node", "subscribes": ["ops.disk", "crisis.*", "*"]}, {"typeId": "b", "kind": "node", "subscribes": ["a b"]}],
			 "grants": {"services": ["messages"], "topics": ["ops.*"]}`),
			[]string{"$.nodes[0].subscribes[1]", "$.nodes[0].subscribes[2]", "$.nodes[1].subscribes[0]"}, false},
		{"subscriptions without a grant", r(node0, `[{"typeId": "a", "kind": "node", "subscribes": ["ops.disk"]}]`),
			[]string{"$.nodes[0].subscribes[0]"}, false},
		{"too many subscriptions", r(node0, `[{"typeId": "a", "kind": "node", "subscribes": [`+manyTopics(MaxSubscriptions+1)+`]}],
			 "grants": {"services": ["messages"], "topics": ["*"]}`),
			[]string{"$.nodes[0].subscribes"}, true},
		{"unknown fields everywhere", r(`"kind": "node"}`, `"kind": "node", "x": 1}`, `"minor": 0}`, `"minor": 0, "patch": 0}`, `"language": "wasm",`, `"language": "wasm", "entry": "main",`),
			[]string{"$.runtime.entry", "$.runtime.abi.patch", "$.nodes[0].x"}, true},
		{"odd keys are quoted in paths", r(`"name":`, `"a b": 1, "name":`), []string{`$["a b"]`}, true},
		{"too deep", `{"name": "local.x", "nodes": [{"inputSchema": ` + strings.Repeat(`{"not":`, 200) + `{}` + strings.Repeat(`}`, 200) + `}]}`, []string{"$"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeManifest([]byte(tc.json))
			var v *ValidationError
			if !errors.As(err, &v) {
				t.Fatalf("err = %v, want *ValidationError", err)
			}
			if !errors.Is(err, ErrInvalidManifest) || !errors.Is(err, ErrInvalidPack) {
				t.Error("not matched by ErrInvalidManifest and ErrInvalidPack")
			}
			var got []string
			for _, p := range v.Problems {
				got = append(got, p.Path)
				if p.Message == "" {
					t.Errorf("%s: empty message", p.Path)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("paths\n got %q\nwant %q\n%v", got, tc.want, err)
			}
			for _, p := range v.Problems {
				if !strings.Contains(err.Error(), p.String()) {
					t.Errorf("Error() lacks %q", p)
				}
			}
			if tc.schema && schemaAccepts(schema, []byte(tc.json)) {
				t.Error("the published schema accepts it")
			}
		})
	}
}

// manyTopics returns n distinct quoted topics, comma-separated.
func manyTopics(n int) string {
	t := make([]string, n)
	for i := range t {
		t[i] = fmt.Sprintf(`"t.%d"`, i)
	}
	return strings.Join(t, ", ")
}

// A subscription outside the grant is refused naming the node, the
// pattern and the grant's topics.
func TestSubscriptionOutsideGrantMessage(t *testing.T) {
	m := strings.Replace(valid, `"nodes": [{"typeId": "example.hello", "kind": "node"}]`,
		`"nodes": [{"typeId": "a", "kind": "node"}, {"typeId": "b", "kind": "node", "subscribes": ["crisis.*"]}],
		 "grants": {"services": ["messages"], "topics": ["ops.*"]}`, 1)
	_, err := DecodeManifest([]byte(m))
	want := `$.nodes[1].subscribes[0]: "crisis.*" is not within the pack's messages grant (topics: ["ops.*"])`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v\nwant it to contain %s", err, want)
	}
}

func TestAllowsTopic(t *testing.T) {
	g := Grants{Services: []Service{ServiceMessages}, Topics: []string{"crisis.*", "ops.alert"}}
	for topic, want := range map[string]bool{
		"crisis.detection": true, "crisis.a.b": true, "crisis": false, "ops.alert": true, "ops.alert.x": false, "llm.prompt": false,
	} {
		if got := g.AllowsTopic(topic); got != want {
			t.Errorf("AllowsTopic(%q) = %v, want %v", topic, got, want)
		}
	}
	g.Services = nil
	if g.AllowsTopic("crisis.detection") {
		t.Error("AllowsTopic without the messages service")
	}
}

// A 100 MB manifest is refused by its size: the message is about the size,
// not about the (invalid) JSON it holds.
func TestDecodeManifestTooLarge(t *testing.T) {
	for _, n := range []int{MaxManifestBytes + 1, 100 << 20} {
		b := bytes.Repeat([]byte("x"), n)
		_, err := DecodeManifest(b)
		var v *ValidationError
		if !errors.As(err, &v) || len(v.Problems) != 1 || !strings.Contains(v.Problems[0].Message, "bytes") {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	b := append([]byte(valid), bytes.Repeat([]byte(" "), MaxManifestBytes-len(valid))...)
	if _, err := DecodeManifest(b); err != nil {
		t.Fatalf("exactly MaxManifestBytes: %v", err)
	}
}

func TestValidateGoValue(t *testing.T) {
	m := &Manifest{
		Name: "local.go", Version: "2.0.0",
		Runtime: Runtime{Language: "wasm", ABI: ABIRequirement{Version: 1},
			Modules: []Module{{Path: "a.wasm", SHA256: sum0}, {Path: "b.wasm", SHA256: sum0}},
			Limits:  RuntimeLimits{MemoryPages: 2, TimeoutMs: 1500, HostCalls: 10}},
		Nodes: []Node{
			{TypeID: "n.a", Kind: KindSkill, Module: "a.wasm", TaskTypes: []string{"ta"}},
			{TypeID: "n.b", Kind: KindSensor, Module: "b.wasm"},
		},
		Grants: Grants{Services: []Service{ServiceMemory, ServiceAdapters}, Adapters: []string{"http"}, MemoryNamespaces: []string{"notes"}},
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if m.ABI() != (abi.Version{Major: 1, Minor: 0}) {
		t.Errorf("ABI %v", m.ABI())
	}
	if got := m.Limits(); got != (ResourceLimits{MemoryBytes: 2 << 16, Timeout: 1500 * time.Millisecond, HostCalls: 10}) {
		t.Errorf("Limits %+v", got)
	}
	if mod, ok := m.NodeModule("n.b"); !ok || mod.Path != "b.wasm" {
		t.Errorf("NodeModule(n.b) = %v %v", mod, ok)
	}
	if _, ok := m.NodeModule("nope"); ok {
		t.Error("NodeModule(nope)")
	}
	if n, ok := m.SkillFor("ta"); !ok || n.TypeID != "n.a" {
		t.Errorf("SkillFor(ta) = %v %v", n, ok)
	}
	if !m.Grants.AllowsAdapter("http") || m.Grants.AllowsAdapter("smtp") || !m.Grants.AllowsMemoryNamespace("notes") || m.Grants.Allows(ServiceQueue) {
		t.Error("grants")
	}

	m.Nodes[0].Module = ""
	m.Runtime.Limits.OutputBytes = -1
	m.Runtime.ABI.Version = 0
	var v *ValidationError
	if err := m.Validate(); !errors.As(err, &v) {
		t.Fatal(err)
	}
	want := []string{"$.runtime.abi.version", "$.runtime.limits.outputBytes", "$.nodes[0].module"}
	var got []string
	for _, p := range v.Problems {
		got = append(got, p.Path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}

	one := &Manifest{Runtime: Runtime{Modules: []Module{{Path: "only.wasm"}}}, Nodes: []Node{{TypeID: "x"}}}
	if mod, ok := one.NodeModule("x"); !ok || mod.Path != "only.wasm" {
		t.Errorf("single module: %v %v", mod, ok)
	}
}

func TestCompileSchema(t *testing.T) {
	s, err := CompileSchema([]byte(`{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate([]byte(`{"greeting":"hi"}`)); err != nil {
		t.Error(err)
	}
	if err := s.Validate([]byte(`{"greeting":1}`)); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("want a one-line error, got %v", err)
	}
	if err := s.Validate([]byte(`{`)); err == nil {
		t.Error("invalid JSON accepted")
	}
	for _, bad := range []string{`{"$ref":"file:///etc/passwd"}`, `{"$ref":"other.json"}`, `[]`, `{"type":"nope"}`} {
		if _, err := CompileSchema([]byte(bad)); err == nil {
			t.Errorf("%s compiled", bad)
		}
	}
}

// A manifest with 20 000 bad nodes is refused with one short line: the
// first problems, each with its values clipped, then how many more there
// are. All of them stay in ValidationError.Problems.
func TestManyProblemsOneShortLine(t *testing.T) {
	const n = 20000
	var b strings.Builder
	b.WriteString(`{"name": "vendor.acme.hello", "version": "1.2.3",
	  "runtime": {"language": "wasm", "abi": {"version": 1, "minor": 0}, "modules": [{"path": "hello.wasm", "sha256": "` + sum0 + `"}]},
	  "nodes": [{"typeId": "` + strings.Repeat("long id ", 10000) + `", "kind": "node"}`)
	for range n - 1 {
		b.WriteString(`, {"typeId": "a b", "kind": "x"}`)
	}
	b.WriteString(`], "` + strings.Repeat("k", 10000) + `": 1}`)
	manifest := []byte(b.String())
	start := time.Now()
	_, err := DecodeManifest(manifest)
	took := time.Since(start)
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("err = %v", err)
	}
	total := 1 + 1 + 2*(n-1) // the unknown field, the long typeId, then a typeId and a kind per node
	if len(v.Problems) != total {
		t.Errorf("%d problems, want %d", len(v.Problems), total)
	}
	// The same through Read, where the manifest is one entry of an archive.
	_, rerr := Read(bytes.NewReader(craft(t, reg("pack.json", manifest))), Limits{})
	for _, err := range []error{err, rerr} {
		msg := err.Error()
		t.Logf("%d bytes in %v: %.400s", len(msg), took, msg)
		if len(msg) >= 4<<10 || strings.ContainsAny(msg, "\n\r") {
			t.Errorf("%d bytes, want one line under 4 KiB", len(msg))
		}
		for _, want := range []string{"$.nodes[0].typeId", "$.nodes[1].typeId", "long id", "…", fmt.Sprintf("and %d more", total-maxProblems)} {
			if !strings.Contains(msg, want) {
				t.Errorf("message lacks %q", want)
			}
		}
	}
}

// A problem hides problems at its path and below it, and only there.
func TestCheckerCovered(t *testing.T) {
	c := &checker{}
	for _, p := range []string{`$.a`, `$["x.y"]`, `$.n[1]`} {
		c.add(p, "problem")
	}
	for path, want := range map[string]bool{
		`$.a`: true, `$.a.b`: true, `$.a[0]`: true, `$.ab`: false, `$`: false,
		`$["x.y"]`: true, `$["x.y"].z`: true, `$["x"]`: false, `$.x`: false, `$["x.y.z"]`: false,
		`$.n[1]`: true, `$.n[1].k`: true, `$.n[10]`: false, `$.n`: false,
	} {
		if got := c.covered(path); got != want {
			t.Errorf("covered(%s) = %v, want %v", path, got, want)
		}
	}
}

func TestHTTPGrantDecodeAndDescribe(t *testing.T) {
	js := strings.Replace(valid, `"nodes":`, `"grants": {"http": [
	  {"host": "api.example.com", "pathPrefix": "/v1/", "methods": ["GET", "POST"], "secrets": [{"name": "github_token", "bearer": true}]},
	  {"scheme": "http", "host": "127.0.0.1", "port": 8080, "allowRanges": ["loopback"], "secrets": [{"name": "k", "query": "key"}]},
	  {"host": "*.example.org"}, {"host": "[::1]", "allowRanges": ["loopback"]}]}, "nodes":`, 1)
	m, err := DecodeManifest([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range m.Grants.HTTP {
		got = append(got, g.Describe())
	}
	want := []string{
		"may reach https://api.example.com:443/v1/ (GET, POST) with secret github_token as a bearer token",
		"may reach http://127.0.0.1:8080/ (GET) including loopback addresses with secret k as query parameter key",
		"may reach https://*.example.org:443/ (GET)",
		"may reach https://[::1]:443/ (GET) including loopback addresses",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if !schemaAccepts(compilePackSchema(t), []byte(js)) {
		t.Error("the published schema refuses a valid http grant")
	}
}
