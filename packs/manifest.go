package packs

import (
	"encoding/json"
	"math"
	"slices"
	"time"

	"github.com/packrun/packrun/abi"
)

// ManifestName is the path of the manifest inside a pack.
const ManifestName = "pack.json"

// AssetsDir is the directory whose files are packed without being declared.
const AssetsDir = "assets"

// Manifest is a decoded pack.json. Field names follow openwop node packs where
// they overlap (name, version, description, license, nodes[].typeId). Get one
// from DecodeManifest, or build one and call Validate.
type Manifest struct {
	// Name is reverse-DNS: vendor.<org>.<pack>[...], community.<author>.<pack>[...]
	// or local.<pack>[...].
	Name string `json:"name"`
	// Version is a SemVer 2.0 version without a "v" prefix.
	Version     string  `json:"version"`
	Description string  `json:"description,omitempty"`
	License     string  `json:"license,omitempty"`
	Runtime     Runtime `json:"runtime"`
	Nodes       []Node  `json:"nodes"`
	// Grants is the capability grant: nothing is granted unless listed.
	Grants Grants `json:"grants,omitzero"`
	// Openwop is set only on a manifest translated from an openwop
	// pack.json (see TranslateOpenwop): what the translation read and
	// decided. A packrun pack.json cannot carry it.
	Openwop *Openwop `json:"openwop,omitempty"`
}

// Runtime says how the pack's modules run.
type Runtime struct {
	// Language is "wasm".
	Language string         `json:"language"`
	ABI      ABIRequirement `json:"abi"`
	Modules  []Module       `json:"modules"`
	Limits   RuntimeLimits  `json:"limits,omitzero"`
}

// ABIRequirement is the host ABI the modules were built for: Version is the
// major (namespace packrun:host/v<Version>), Minor the additions they need.
type ABIRequirement struct {
	Version int `json:"version"`
	Minor   int `json:"minor"`
}

// Module is one .wasm file of the pack, pinned by its digest.
type Module struct {
	// Path is relative to the pack root, slash-separated and clean.
	Path string `json:"path"`
	// SHA256 is the file's digest, 64 lowercase hex digits.
	SHA256 string `json:"sha256"`
}

// RuntimeLimits are the pack's own limits as written in pack.json. Zero means
// "not set" (the host default applies); the host clamps every value to its
// maxima.
type RuntimeLimits struct {
	MemoryPages int64 `json:"memoryPages,omitempty"`
	TimeoutMs   int64 `json:"timeoutMs,omitempty"`
	OutputBytes int64 `json:"outputBytes,omitempty"`
	HostCalls   int64 `json:"hostCalls,omitempty"`
}

// Bounds on manifest values.
const (
	maxMemoryPages = 65536     // wasm32: 4 GiB
	maxTimeoutMs   = 1<<31 - 1 // ~24.8 days
	maxSafeInt     = 1<<53 - 1 // largest integer every JSON reader keeps exactly
	wasmPageBytes  = 65536
	maxTextLen     = 1024 // description, license (characters)
	maxNameLen     = 128  // pack name, version, typeId, task type, adapter, namespace
	maxPathLen     = 1024 // a file path inside a pack
	maxSegmentLen  = 255  // one segment of such a path
	draft2020      = "https://json-schema.org/draft/2020-12/schema"
)

// Kind is what a node is for.
type Kind string

const (
	KindNode   Kind = "node"   // a workflow node
	KindSkill  Kind = "skill"  // run by the task queue for its task types
	KindSensor Kind = "sensor" // run on a schedule or trigger; emits sensor events
)

// Node is one entry point of the pack.
type Node struct {
	TypeID string `json:"typeId"`
	Kind   Kind   `json:"kind"`
	// Module names the module (Module.Path) that exports the node. It may be
	// empty when the pack has exactly one module.
	Module string `json:"module,omitempty"`
	// Export names the function serving the node when the module is an
	// Extism plugin (it imports extism:host/env); ignored otherwise.
	Export      string `json:"export,omitempty"`
	Description string `json:"description,omitempty"`
	// InputSchema and OutputSchema are JSON Schema 2020-12 documents.
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// TaskTypes are the task types a skill serves, unique across the pack.
	TaskTypes []string `json:"taskTypes,omitempty"`
	// Cadence is how often packrun serve runs a sensor node: whole
	// seconds, 1s or more, written as a duration ("30s", "5m", "1h").
	// Only sensor nodes have one; a sensor without one runs only when
	// asked (packrun sensors run).
	Cadence string `json:"cadence,omitempty"`
	// Skill is a skill node's SkillManifest (the agent runtime schema §4); only skills
	// carry one, and it is optional (see Node.SkillManifest).
	Skill *Skill `json:"skill,omitempty"`
	// Subscribes are the message topic patterns (abi.CheckTopicPattern:
	// "crisis.detection", "crisis.*", "*") the node receives agent
	// messages on, as tasks of type host.SubscriberTaskType(typeId). At
	// most MaxSubscriptions, each within the pack's messages grant
	// (Grants.Topics).
	Subscribes []string `json:"subscribes,omitempty"`
}

// MaxSubscriptions caps the topic patterns one node subscribes to (the
// store's host.MaxSubscriptions; packs does not import host).
const MaxSubscriptions = 32

// Skill is the agent runtime schema's SkillManifest (§4), field names as written. Its
// paths are relative to the pack's assets/ directory and must name files
// the pack holds.
type Skill struct {
	// SkillID names the skill; default: the node's typeId.
	SkillID     string   `json:"skill_id,omitempty"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	// InstructionPath is the skill's SKILL.md (under assets/).
	InstructionPath string `json:"instruction_path,omitempty"`
	// SubagentPath is its AGENT.md (under assets/).
	SubagentPath string       `json:"subagent_path,omitempty"`
	CLICommands  []CLICommand `json:"cli_commands,omitempty"`
	SensorPath   string       `json:"sensor_path,omitempty"`
	// InputSchemaID and OutputSchemaID name the schemas of the skill's
	// input and output (informative; the node's inputSchema and
	// outputSchema are what is enforced).
	InputSchemaID  string `json:"input_schema_id,omitempty"`
	OutputSchemaID string `json:"output_schema_id,omitempty"`
}

// CLICommand is a command line a skill offers its operators.
type CLICommand struct {
	Name        string `json:"name"`
	Command     string `json:"command"`
	Description string `json:"description,omitempty"`
}

// SkillManifest returns a skill node's SkillManifest with its defaults:
// skill_id the typeId, description the node's. ok is false for a node that
// is not a skill.
func (n Node) SkillManifest() (s Skill, ok bool) {
	if n.Kind != KindSkill {
		return Skill{}, false
	}
	if n.Skill != nil {
		s = *n.Skill
	}
	if s.SkillID == "" {
		s.SkillID = n.TypeID
	}
	if s.Description == "" {
		s.Description = n.Description
	}
	return s, true
}

// SkillPath is one asset path a skill manifest names.
type SkillPath struct {
	Field string // "instruction_path", "subagent_path" or "sensor_path"
	Path  string // relative to assets/
}

// Paths returns the asset paths the skill names, in field order.
func (s *Skill) Paths() []SkillPath {
	var out []SkillPath
	for _, p := range []SkillPath{{"instruction_path", s.InstructionPath}, {"subagent_path", s.SubagentPath}, {"sensor_path", s.SensorPath}} {
		if p.Path != "" {
			out = append(out, p)
		}
	}
	return out
}

// Service is a host service a pack may be granted.
type Service string

const (
	ServiceMemory    Service = "memory"
	ServiceQueue     Service = "queue"
	ServiceAdapters  Service = "adapters"
	ServiceEvidence  Service = "evidence"
	ServiceArtifacts Service = "artifacts"
	ServiceConfig    Service = "config"
	ServiceMessages  Service = "messages"
	ServiceSensors   Service = "sensors"
)

// services lists every service a manifest may grant.
var services = []Service{ServiceMemory, ServiceQueue, ServiceAdapters, ServiceEvidence,
	ServiceArtifacts, ServiceConfig, ServiceMessages, ServiceSensors}

// Services returns every service a manifest may grant (a copy).
func Services() []Service { return slices.Clone(services) }

// Grants is what the pack may use. The zero value grants nothing.
type Grants struct {
	Services []Service `json:"services,omitempty"`
	// Adapters the pack may invoke; requires ServiceAdapters.
	Adapters []string `json:"adapters,omitempty"`
	// MemoryNamespaces the pack may read and write; requires ServiceMemory.
	MemoryNamespaces []string `json:"memoryNamespaces,omitempty"`
	// Topics are the message topic patterns (abi.CheckTopicPattern) the
	// pack may publish (message_publish, its outcomes' external_messages)
	// and its nodes may subscribe to; requires ServiceMessages.
	Topics []string `json:"topics,omitempty"`
	// HTTP lists the destinations the pack may reach with http_request;
	// an empty list grants nothing.
	HTTP []HTTPGrant `json:"http,omitempty"`
}

// Allows reports whether service s is granted.
func (g Grants) Allows(s Service) bool { return slices.Contains(g.Services, s) }

// AllowsAdapter reports whether adapter name may be invoked.
func (g Grants) AllowsAdapter(name string) bool {
	return g.Allows(ServiceAdapters) && slices.Contains(g.Adapters, name)
}

// AllowsMemoryNamespace reports whether memory namespace ns may be used.
func (g Grants) AllowsMemoryNamespace(ns string) bool {
	return g.Allows(ServiceMemory) && slices.Contains(g.MemoryNamespaces, ns)
}

// AllowsTopic reports whether the pack may publish or receive topic: the
// messages service is granted and one of Topics matches it.
func (g Grants) AllowsTopic(topic string) bool {
	return g.Allows(ServiceMessages) && abi.MatchAnyTopic(g.Topics, topic)
}

// ABI returns the ABI version the pack needs.
func (m *Manifest) ABI() abi.Version {
	return abi.Version{Major: m.Runtime.ABI.Version, Minor: m.Runtime.ABI.Minor}
}

// Module returns the module with the given path.
func (m *Manifest) Module(path string) (Module, bool) {
	i := slices.IndexFunc(m.Runtime.Modules, func(x Module) bool { return x.Path == path })
	if i < 0 {
		return Module{}, false
	}
	return m.Runtime.Modules[i], true
}

// Node returns the node with the given typeId.
func (m *Manifest) Node(typeID string) (Node, bool) {
	i := slices.IndexFunc(m.Nodes, func(n Node) bool { return n.TypeID == typeID })
	if i < 0 {
		return Node{}, false
	}
	return m.Nodes[i], true
}

// NodeModule returns the module that exports the node typeID: the one the
// node names, or the only module when it names none.
func (m *Manifest) NodeModule(typeID string) (Module, bool) {
	n, ok := m.Node(typeID)
	if !ok {
		return Module{}, false
	}
	return m.nodeModule(n)
}

func (m *Manifest) nodeModule(n Node) (Module, bool) {
	if n.Module == "" {
		if len(m.Runtime.Modules) == 1 {
			return m.Runtime.Modules[0], true
		}
		return Module{}, false
	}
	return m.Module(n.Module)
}

// Exports maps the typeIds of the nodes a module serves to the functions
// serving them (Node.Export, or the typeId), as an Extism plugin needs.
func (m *Manifest) Exports(modulePath string) map[string]string {
	out := map[string]string{}
	for _, n := range m.Nodes {
		if mod, ok := m.nodeModule(n); !ok || mod.Path != modulePath {
			continue
		}
		if n.Export != "" {
			out[n.TypeID] = n.Export
		} else {
			out[n.TypeID] = n.TypeID
		}
	}
	return out
}

// SkillFor returns the skill that serves taskType.
func (m *Manifest) SkillFor(taskType string) (Node, bool) {
	i := slices.IndexFunc(m.Nodes, func(n Node) bool {
		return n.Kind == KindSkill && slices.Contains(n.TaskTypes, taskType)
	})
	if i < 0 {
		return Node{}, false
	}
	return m.Nodes[i], true
}

// ResourceLimits are a pack's limits in Go units. A zero field means the pack
// sets none and the host default applies. The host clamps them to its maxima.
type ResourceLimits struct {
	MemoryBytes uint64
	Timeout     time.Duration
	OutputBytes uint64
	HostCalls   int
}

// Limits returns the pack's limits.
func (m *Manifest) Limits() ResourceLimits {
	l := m.Runtime.Limits
	var r ResourceLimits
	if l.MemoryPages > 0 {
		r.MemoryBytes = uint64(min(l.MemoryPages, maxMemoryPages)) * wasmPageBytes
	}
	if l.TimeoutMs > 0 {
		r.Timeout = time.Duration(min(l.TimeoutMs, maxTimeoutMs)) * time.Millisecond
	}
	if l.OutputBytes > 0 {
		r.OutputBytes = uint64(l.OutputBytes)
	}
	if l.HostCalls > 0 {
		r.HostCalls = int(min(l.HostCalls, maxSafeInt, int64(math.MaxInt)))
	}
	return r
}

// InstalledSkill is a skill node of a pack with its SkillManifest (the
// defaults applied), the pack (name@version) and the task types it serves:
// what `packrun skills`, `packrun inspect` and GET /v1/skills show.
type InstalledSkill struct {
	Skill
	Pack      string   `json:"pack"`
	Node      string   `json:"node"`
	TaskTypes []string `json:"task_types"`
}

// Skills returns the pack's skills, in node order.
func (m *Manifest) Skills() []InstalledSkill {
	var out []InstalledSkill
	for _, n := range m.Nodes {
		if s, ok := n.SkillManifest(); ok {
			out = append(out, InstalledSkill{Skill: s, Pack: m.Name + "@" + m.Version, Node: n.TypeID, TaskTypes: slices.Clone(n.TaskTypes)})
		}
	}
	return out
}
