package packs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/packrun/packrun/internal/strictjson"
	"github.com/packrun/packrun/internal/textclip"
)

// Openwop records how an openwop pack.json (spec/v1/node-packs.md, v2
// schemas/v2/node-pack-manifest.schema.json) was translated into packrun's
// model: what it declared that packrun has no field for, and what the
// translation decided. `packrun inspect` shows it.
type Openwop struct {
	// Format is "openwop-v2" when pack.json has a v2 signing block
	// (scheme ed25519-canonical-json) or a kind, "openwop-v1" otherwise.
	Format string `json:"format"`
	// Engines is engines.openwop as written.
	Engines string `json:"engines"`
	// Entry is runtime.entry as written; Module the archive path of the
	// module used, and EntryNote says why they differ.
	Entry     string `json:"entry"`
	Module    string `json:"module"`
	EntryNote string `json:"entryNote,omitempty"`
	// ABIVersion is runtime.wasm.abiVersion (1 when absent): the
	// RFC 0008 ABI, which is packrun's host ABI major.
	ABIVersion int `json:"abiVersion"`
	// Signing is pack.json's signing block, if any.
	Signing *OpenwopSigning `json:"signing,omitempty"`
	// Nodes are the openwop fields of each node packrun has no field for.
	Nodes []OpenwopNode `json:"nodes"`
	// Ignored lists the extension keys (openwop-, x-, vendor.) ignored, as
	// JSON paths.
	Ignored []string `json:"ignored,omitempty"`
}

// OpenwopSigning is an openwop pack.json signing block: v2's {keyId,
// scheme} or v1's {publicKeyRef, signatureRef, method}.
type OpenwopSigning struct {
	KeyID        string `json:"keyId,omitempty"`
	Scheme       string `json:"scheme,omitempty"`
	PublicKeyRef string `json:"publicKeyRef,omitempty"`
	SignatureRef string `json:"signatureRef,omitempty"`
	Method       string `json:"method,omitempty"`
}

// SchemeCanonicalJSON is openwop v2's one signing scheme: a detached
// Ed25519 signature over the RFC 8785 (JCS) form of pack.json.
const SchemeCanonicalJSON = "ed25519-canonical-json"

// OpenwopNode is what an openwop node declares beyond its typeId and
// description.
type OpenwopNode struct {
	TypeID   string `json:"typeId"`
	Version  string `json:"version,omitempty"`
	Category string `json:"category,omitempty"`
	Role     string `json:"role,omitempty"`
	Label    string `json:"label,omitempty"`
}

// openwopMajors are the openwop protocol majors this host accepts in a
// pack's engines.openwop range: the published v1 packs and v2's fixtures.
var openwopMajors = []int{1, 2}

// Field lists of an openwop pack.json, as its schemas name them. Fields
// packrun has no use for are read and ignored; the ones that ask for
// something packrun cannot give (dependencies, secrets, platform
// primitives) are refused when not empty.
var (
	openwopTop = []string{"$schema", "kind", "name", "version", "description", "author", "license", "homepage",
		"repository", "keywords", "engines", "dependencies", "peerDependencies", "peerDependenciesMeta",
		"nodes", "agents", "runtime", "signing", "connector"}
	openwopRuntime = []string{"language", "entry", "format", "minRuntimeVersion", "requires", "mcpServer", "wasm"}
	openwopNodeKey = []string{"typeId", "version", "label", "description", "category", "role", "capabilities",
		"configSchemaRef", "inputSchemaRef", "outputSchemaRef", "outputs", "envelopeContractRef", "artifact",
		"mcp", "requiresSecrets", "requiredCredentials", "auth", "requiredModelCapabilities", "fallbackModel", "kind"}
	openwopWasm    = []string{"abiVersion", "memoryPagesInitial", "memoryPagesMax"}
	openwopSigning = []string{"keyId", "scheme", "publicKeyRef", "signatureRef", "method", "publicKeyUrl"}
)

// IsOpenwopManifest reports whether pack.json is written in openwop's
// format rather than packrun's: it has engines, or a runtime.entry and no
// runtime.modules. packrun's own schema allows neither.
func IsOpenwopManifest(b []byte) bool {
	var probe struct {
		Engines json.RawMessage `json:"engines"`
		Runtime struct {
			Entry   json.RawMessage `json:"entry"`
			Modules json.RawMessage `json:"modules"`
		} `json:"runtime"`
	}
	if json.Unmarshal(b, &probe) != nil {
		return false
	}
	return probe.Engines != nil || (probe.Runtime.Entry != nil && probe.Runtime.Modules == nil)
}

// TranslateOpenwop decodes an openwop pack.json (untrusted) and translates
// it into packrun's model: the module is runtime.entry, or dist/<its base
// name> when the archive holds no file at runtime.entry (the published
// rust-hello pack does this; EntryNote says so), pinned by the sha256 of
// its bytes in files; the ABI is runtime.wasm.abiVersion; every node is a
// workflow node. Unknown extension keys (openwop-, x-, vendor.) are
// ignored as openwop v2 requires; any other unknown key is refused. The
// result is validated as a packrun manifest with openwop's name grammar.
// Problems are a *ValidationError with JSON paths in the openwop pack.json.
func TranslateOpenwop(b []byte, file func(string) ([]byte, bool)) (*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, &ValidationError{Problems: []Problem{{"$", "manifest is " + strconv.Itoa(len(b)) + " bytes, more than allowed"}}}
	}
	c := &checker{}
	tree, err := parseJSON(b, c)
	if err != nil {
		return nil, &ValidationError{Problems: []Problem{{"$", textclip.Clip("not valid JSON: "+err.Error(), maxProblemText)}}}
	}
	ow := &Openwop{}
	m := c.openwopManifest(tree, ow)
	if m != nil && len(c.problems) == 0 {
		c.resolveEntry(m, ow, file)
	}
	if m != nil && len(c.problems) == 0 {
		m.Openwop = ow
		m.check(c)
	}
	if len(c.problems) > 0 {
		return nil, &ValidationError{Problems: c.problems}
	}
	return m, nil
}

// openObject is object for openwop documents: fields are the known keys;
// an extension key is recorded in ow.Ignored, any other key is a problem.
func (c *checker) openObject(ow *Openwop, p string, v any, fields []string) (map[string]any, bool) {
	obj, ok := v.(*strictjson.Object)
	if !ok {
		c.add(p, "must be an object, not %s", typeName(v))
		return nil, false
	}
	keys := make([]string, 0, len(obj.Vals))
	for k := range obj.Vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		switch {
		case slices.Contains(fields, k):
		case strings.HasPrefix(k, "openwop-"), strings.HasPrefix(k, "x-"), strings.HasPrefix(k, "vendor."):
			ow.Ignored = append(ow.Ignored, fieldPath(p, textclip.Clip(k, maxEcho)))
		default:
			c.add(fieldPath(p, textclip.Clip(k, maxEcho)), "unknown field (an openwop extension key starts with openwop-, x- or vendor.)")
		}
	}
	return obj.Vals, true
}

// refuseNonEmpty reports a problem when o[key] is present and not empty:
// what the pack asks for there packrun cannot provide.
func (c *checker) refuseNonEmpty(o map[string]any, p, key, why string) {
	v, ok := o[key]
	if !ok {
		return
	}
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return
		}
	case *strictjson.Object:
		if len(x.Vals) == 0 {
			return
		}
	}
	c.add(fieldPath(p, key), "%s", why)
}

func (c *checker) openwopManifest(v any, ow *Openwop) *Manifest {
	o, ok := c.openObject(ow, "$", v, openwopTop)
	if !ok {
		return nil
	}
	m := c.identity(o)
	ow.Format = "openwop-v1"
	if kind, ok := o["kind"]; ok {
		ow.Format = "openwop-v2"
		if k := c.strValue("$.kind", kind); k != "node" && k != "" {
			c.add("$.kind", "%s: only node packs (kind \"node\") run here", quote(k))
		}
	}
	c.refuseNonEmpty(o, "$", "dependencies", "pack dependencies are not resolved by this host: install each pack on its own")
	c.refuseNonEmpty(o, "$", "peerDependencies", "pack_peer_dependency_missing: this host provides no openwop peer capabilities")
	c.refuseNonEmpty(o, "$", "agents", "agent manifests are not supported here")
	if ev, p, ok := c.field(o, "$", "engines", true); ok {
		if e, ok := c.openObject(ow, p, ev, []string{"openwop"}); ok {
			ow.Engines = c.str(e, p, "openwop", true)
			if ow.Engines != "" {
				if err := admitsMajor(ow.Engines, openwopMajors); err != "" {
					c.add(fieldPath(p, "openwop"), "pack_engine_unsupported: %s %s", quote(ow.Engines), err)
				}
			}
		}
	}
	if sv, p, ok := c.field(o, "$", "signing", false); ok {
		if s, ok := c.openObject(ow, p, sv, openwopSigning); ok {
			ow.Signing = &OpenwopSigning{
				KeyID: c.str(s, p, "keyId", false), Scheme: c.str(s, p, "scheme", false),
				PublicKeyRef: c.str(s, p, "publicKeyRef", false), SignatureRef: c.str(s, p, "signatureRef", false),
				Method: c.str(s, p, "method", false),
			}
			if ow.Signing.Scheme != "" {
				ow.Format = "openwop-v2"
				if ow.Signing.Scheme != SchemeCanonicalJSON || ow.Signing.KeyID == "" {
					c.add(p, "a v2 signing block is {keyId, scheme: %q}", SchemeCanonicalJSON)
				}
			}
		}
	}
	if rv, p, ok := c.field(o, "$", "runtime", true); ok {
		c.openwopRuntime(rv, p, m, ow)
	}
	nodes, np := c.array(o, "$", "nodes", true)
	if a, ok := o["nodes"].([]any); ok && len(a) == 0 {
		c.add(np, "must list at least one node")
	}
	for i, nv := range nodes {
		c.openwopNode(nv, indexPath(np, i), m, ow)
	}
	return m
}

func (c *checker) openwopRuntime(v any, p string, m *Manifest, ow *Openwop) {
	r, ok := c.openObject(ow, p, v, openwopRuntime)
	if !ok {
		return
	}
	m.Runtime.Language = c.str(r, p, "language", true)
	ow.Entry = c.str(r, p, "entry", true)
	if f := c.str(r, p, "format", false); f != "" && f != "wasm" {
		c.add(fieldPath(p, "format"), "%s: only core WebAssembly modules (format \"wasm\") run here", quote(f))
	}
	c.refuseNonEmpty(r, p, "requires", "pack_runtime_requirement_unmet: this host grants no platform primitives (net, fs, env, subprocess, clock)")
	ow.ABIVersion = 1
	if wv, wp, ok := c.field(r, p, "wasm", false); ok {
		if w, ok := c.openObject(ow, wp, wv, openwopWasm); ok {
			if _, ok := w["abiVersion"]; ok {
				ow.ABIVersion = int(c.integer(w, wp, "abiVersion", false, 0, math.MaxInt32))
			}
			c.integer(w, wp, "memoryPagesInitial", false, 0, maxMemoryPages)
			m.Runtime.Limits.MemoryPages = c.integer(w, wp, "memoryPagesMax", false, 0, maxMemoryPages)
		}
	}
	m.Runtime.ABI = ABIRequirement{Version: ow.ABIVersion}
}

func (c *checker) openwopNode(v any, p string, m *Manifest, ow *Openwop) {
	n, ok := c.openObject(ow, p, v, openwopNodeKey)
	if !ok {
		return
	}
	node := Node{TypeID: c.str(n, p, "typeId", true), Kind: KindNode, Description: c.str(n, p, "description", false)}
	if k, ok := n["kind"]; ok {
		if s := c.strValue(fieldPath(p, "kind"), k); s != string(KindNode) {
			c.add(fieldPath(p, "kind"), "%s: an openwop pack's nodes are workflow nodes (\"node\")", quote(s))
		}
	}
	for _, key := range []string{"requiresSecrets", "requiredCredentials"} {
		c.refuseNonEmpty(n, p, key, "credential_unavailable: this host resolves no secrets or credentials for openwop nodes")
	}
	if _, ok := n["auth"]; ok {
		c.add(fieldPath(p, "auth"), "credential_unavailable: this host has no openwop OAuth flow")
	}
	m.Nodes = append(m.Nodes, node)
	ow.Nodes = append(ow.Nodes, OpenwopNode{
		TypeID: node.TypeID, Version: c.str(n, p, "version", false), Category: c.str(n, p, "category", false),
		Role: c.str(n, p, "role", false), Label: c.str(n, p, "label", false),
	})
}

// resolveEntry finds the module runtime.entry names: the file at that
// path, or else dist/<its base name>, and pins it by its digest.
func (c *checker) resolveEntry(m *Manifest, ow *Openwop, file func(string) ([]byte, bool)) {
	entry := strings.TrimPrefix(ow.Entry, "./")
	if reason := checkPath(entry); reason != "" {
		c.add("$.runtime.entry", "%s: %s", quote(ow.Entry), reason)
		return
	}
	data, ok := file(entry)
	ow.Module = entry
	if !ok {
		alt := "dist/" + path.Base(entry)
		if data, ok = file(alt); !ok {
			c.add("$.runtime.entry", "%s is not in the archive, nor is %s", quote(ow.Entry), alt)
			return
		}
		ow.Module = alt
		ow.EntryNote = "runtime.entry " + quote(ow.Entry) + " is not in the archive; using " + alt + " (the module under dist/ with its base name)"
	}
	if entry == ManifestName || ow.Module == ManifestName {
		c.add("$.runtime.entry", "%s cannot be a module", ManifestName)
		return
	}
	sum := sha256.Sum256(data)
	m.Runtime.Modules = []Module{{Path: ow.Module, SHA256: hex.EncodeToString(sum[:])}}
}

// semver3 is a MAJOR.MINOR.PATCH triple.
type semver3 [3]int

func (v semver3) less(w semver3) bool { return slices.Compare(v[:], w[:]) < 0 }

// admitsMajor reports "" when the npm-style range r (comparator sets
// joined by "||"; comparators >=, >, <=, <, =, ^, ~ or a bare partial
// version) admits some version of one of the majors, else why not. Per
// openwop v2, a set with no upper bound is bounded by <2.0.0.
func admitsMajor(r string, majors []int) string {
	for _, set := range strings.Split(r, "||") {
		lo, hi, ok := parseRangeSet(set)
		if !ok {
			return "is not a version range this host reads (>=A <B, ^A, ~A, A)"
		}
		for _, mj := range majors {
			if lo.less(semver3{mj + 1}) && (semver3{mj}).less(hi) {
				return ""
			}
		}
	}
	return "admits no openwop protocol major this host speaks (1, 2)"
}

// parseRangeSet returns the interval [lo, hi) of one comparator set.
func parseRangeSet(set string) (lo, hi semver3, ok bool) {
	hi = semver3{math.MaxInt32}
	bounded := false
	fields := strings.Fields(set)
	if len(fields) == 0 {
		return lo, hi, false
	}
	for _, f := range fields {
		op := strings.TrimRight(f[:min(len(f), 2)], "0123456789.")
		v, parts, ok := parsePartial(f[len(op):])
		if !ok {
			return lo, hi, false
		}
		next := v // the first version above every version v stands for
		next[parts-1]++
		for i := parts; i < 3; i++ {
			next[i] = 0
		}
		up, down := hi, lo
		switch op {
		case ">=":
			down = v
		case ">":
			down = next
		case "<":
			up = v
		case "<=":
			up = next
		case "", "=":
			down, up = v, next
		case "^":
			down, up = v, caret(v, parts)
		case "~":
			down, up = v, tilde(v, parts)
		default:
			return lo, hi, false
		}
		if lo.less(down) {
			lo = down
		}
		if up.less(hi) {
			hi, bounded = up, true
		}
	}
	if !bounded {
		hi = semver3{2}
	}
	return lo, hi, true
}

func caret(v semver3, parts int) semver3 {
	switch {
	case v[0] > 0 || parts == 1:
		return semver3{v[0] + 1}
	case v[1] > 0 || parts == 2:
		return semver3{0, v[1] + 1}
	}
	return semver3{0, 0, v[2] + 1}
}

func tilde(v semver3, parts int) semver3 {
	if parts == 1 {
		return semver3{v[0] + 1}
	}
	return semver3{v[0], v[1] + 1}
}

// parsePartial reads "1", "1.2" or "1.2.3" (no pre-release).
func parsePartial(s string) (semver3, int, bool) {
	var v semver3
	parts := strings.Split(s, ".")
	if len(parts) > 3 {
		return v, 0, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 1<<20 || (len(p) > 1 && p[0] == '0') {
			return v, 0, false
		}
		v[i] = n
	}
	return v, len(parts), true
}
