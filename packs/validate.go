package packs

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/packrun/packrun/abi"
)

// The patterns are compiled on first use rather than when the package is
// initialised: every packrun command links this package, and most never
// validate a manifest.
var (
	// namePattern: vendor.<org>.<pack>[...], community.<author>.<pack>[...], local.<pack>[...].
	namePattern = lazyRegexp(`^(?:(?:vendor|community)\.[a-z0-9][a-z0-9-]*|local)(?:\.[a-z0-9][a-z0-9-]*)+$`)
	// openwopNamePattern is openwop's pack name grammar
	// (schemas/v2/node-pack-manifest.schema.json "name"), for packs
	// translated from an openwop pack.json.
	openwopNamePattern = lazyRegexp(`^(?:core|vendor|community|private)\.[a-z][a-z0-9_-]*(?:\.[a-z][a-zA-Z0-9_-]*)+$`)
	// semverPattern is the SemVer 2.0 grammar (semver.org), without a "v" prefix.
	semverPattern = lazyRegexp(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
		`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
		`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
	// identPattern: typeIds, task types, adapter names, memory namespaces.
	identPattern  = lazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9][A-Za-z0-9_-]*)*$`)
	sha256Pattern = lazyRegexp(`^[0-9a-f]{64}$`)
)

// lazyRegexp returns a function compiling expr the first time it is called.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// Validate checks m and returns a *ValidationError listing every problem, or
// nil. DecodeManifest calls it; call it on a Manifest built in Go.
func (m *Manifest) Validate() error {
	c := &checker{}
	m.check(c)
	if len(c.problems) > 0 {
		return &ValidationError{Problems: c.problems}
	}
	return nil
}

// check adds the problems of m to c. Paths are those of pack.json.
func (m *Manifest) check(c *checker) {
	switch {
	case m.Name == "":
		c.add("$.name", "must not be empty")
	case len(m.Name) > maxNameLen:
		c.add("$.name", "longer than %d characters", maxNameLen)
	case m.Openwop != nil:
		if !openwopNamePattern().MatchString(m.Name) {
			c.add("$.name", "%s is not an openwop pack name: use core., vendor., community. or private.<org>.<pack>, the first two segments [a-z][a-z0-9_-]*, the rest [a-z][a-zA-Z0-9_-]*", quote(m.Name))
		}
	case !namePattern().MatchString(m.Name):
		c.add("$.name", "%s is not a pack name: use vendor.<org>.<pack>, community.<author>.<pack> or local.<pack>, segments of a-z, 0-9 and '-' starting with a letter or digit", quote(m.Name))
	}
	switch {
	case m.Version == "":
		c.add("$.version", "must not be empty")
	case len(m.Version) > maxNameLen:
		c.add("$.version", "longer than %d characters", maxNameLen)
	case !semverPattern().MatchString(m.Version):
		c.add("$.version", "%s is not a SemVer 2.0 version (MAJOR.MINOR.PATCH[-pre][+build], no \"v\")", quote(m.Version))
	}
	checkText(c, "$.description", m.Description)
	checkText(c, "$.license", m.License)

	r := m.Runtime
	if r.Language != "wasm" {
		c.add("$.runtime.language", "must be \"wasm\"")
	}
	if !abi.Serves(r.ABI.Version) {
		c.add("$.runtime.abi.version", "ABI version %d is not served; this host serves %s", r.ABI.Version, abi.ServedList())
	}
	if r.ABI.Minor < 0 {
		c.add("$.runtime.abi.minor", "must not be negative")
	}
	if len(r.Modules) == 0 {
		c.add("$.runtime.modules", "at least one module is required")
	}
	for i, mod := range r.Modules {
		p := indexPath("$.runtime.modules", i)
		if reason := checkPath(mod.Path); reason != "" {
			c.add(p+".path", "%s", reason)
		} else if mod.Path == ManifestName {
			c.add(p+".path", "%s cannot be a module", ManifestName)
		} else if slices.ContainsFunc(r.Modules[:i], func(x Module) bool { return strings.EqualFold(x.Path, mod.Path) }) {
			c.add(p+".path", "duplicate module %s", quote(mod.Path))
		}
		if !sha256Pattern().MatchString(mod.SHA256) {
			c.add(p+".sha256", "must be 64 lowercase hex digits")
		}
	}
	l := r.Limits
	checkLimit(c, "memoryPages", l.MemoryPages, maxMemoryPages)
	checkLimit(c, "timeoutMs", l.TimeoutMs, maxTimeoutMs)
	checkLimit(c, "outputBytes", l.OutputBytes, maxSafeInt)
	checkLimit(c, "hostCalls", l.HostCalls, maxSafeInt)

	if len(m.Nodes) == 0 {
		c.add("$.nodes", "at least one node is required")
	}
	taskOwner := map[string]string{}
	for i, n := range m.Nodes {
		p := indexPath("$.nodes", i)
		switch {
		case n.TypeID == "":
			c.add(p+".typeId", "must not be empty")
		case len(n.TypeID) > maxNameLen || !identPattern().MatchString(n.TypeID):
			c.add(p+".typeId", "%s is not a typeId: dot-separated segments of letters, digits, '_' and '-', at most %d characters", quote(n.TypeID), maxNameLen)
		case slices.ContainsFunc(m.Nodes[:i], func(x Node) bool { return x.TypeID == n.TypeID }):
			c.add(p+".typeId", "duplicate typeId %s", quote(n.TypeID))
		}
		switch n.Kind {
		case KindNode, KindSkill, KindSensor:
		default:
			c.add(p+".kind", "must be \"node\", \"skill\" or \"sensor\"")
		}
		if n.Module == "" && len(r.Modules) > 1 {
			c.add(p+".module", "required when the pack has several modules")
		} else if n.Module != "" {
			if _, ok := m.Module(n.Module); !ok {
				c.add(p+".module", "names no module in runtime.modules: %s", quote(n.Module))
			}
		}
		checkText(c, p+".description", n.Description)
		checkSchema(c, p+".inputSchema", n.InputSchema)
		checkSchema(c, p+".outputSchema", n.OutputSchema)
		if n.Kind == KindSkill && len(n.TaskTypes) == 0 && len(n.Subscribes) == 0 {
			c.add(p+".taskTypes", "a skill must serve at least one task type or subscribe to a topic")
		}
		if n.Kind != KindSkill && len(n.TaskTypes) > 0 {
			c.add(p+".taskTypes", "only skills serve task types")
		}
		if n.Cadence != "" {
			if n.Kind != KindSensor {
				c.add(p+".cadence", "only sensor nodes have a cadence")
			} else if !validCadence(n.Cadence) {
				c.add(p+".cadence", "%s is not a cadence: whole seconds, 1s or more, written as 30s, 5m or 1h", quote(n.Cadence))
			}
		}
		if n.Skill != nil {
			if n.Kind != KindSkill {
				c.add(p+".skill", "only skills carry a skill manifest")
			}
			checkSkill(c, p+".skill", n.Skill)
		}
		checkSubscribes(c, p, n.Subscribes, m.Grants.Topics)
		for j, tt := range n.TaskTypes {
			tp := indexPath(p+".taskTypes", j)
			if !checkIdent(c, tp, tt, "task type") {
				continue
			}
			if owner, dup := taskOwner[tt]; dup {
				c.add(tp, "task type %s is already served by %s", quote(tt), owner)
				continue
			}
			taskOwner[tt] = p
		}
	}

	g := m.Grants
	for i, s := range g.Services {
		p := indexPath("$.grants.services", i)
		switch {
		case !slices.Contains(services, s):
			c.add(p, "unknown service %s; known: %s", quote(string(s)), serviceList())
		case slices.Contains(g.Services[:i], s):
			c.add(p, "duplicate service %s", quote(string(s)))
		}
	}
	checkNames(c, "$.grants.adapters", g.Adapters, "adapter name")
	if len(g.Adapters) > 0 && !g.Allows(ServiceAdapters) {
		c.add("$.grants.adapters", "lists adapters but the %q service is not granted", ServiceAdapters)
	}
	checkNames(c, "$.grants.memoryNamespaces", g.MemoryNamespaces, "memory namespace")
	if len(g.MemoryNamespaces) > 0 && !g.Allows(ServiceMemory) {
		c.add("$.grants.memoryNamespaces", "lists namespaces but the %q service is not granted", ServiceMemory)
	}
	checkPatterns(c, "$.grants.topics", g.Topics)
	if len(g.Topics) > 0 && !g.Allows(ServiceMessages) {
		c.add("$.grants.topics", "lists topics but the %q service is not granted", ServiceMessages)
	}
	checkHTTP(c, g.HTTP)
}

// checkPatterns checks a list of topic patterns: each valid, none twice.
// It reports whether all were.
func checkPatterns(c *checker, p string, patterns []string) bool {
	ok := true
	for i, s := range patterns {
		ip := indexPath(p, i)
		if err := abi.CheckTopicPattern(s); err != nil {
			c.add(ip, "%v", err)
			ok = false
		} else if slices.Contains(patterns[:i], s) {
			c.add(ip, "duplicate topic pattern %s", quote(s))
			ok = false
		}
	}
	return ok
}

// quoteAll quotes each of ss, comma-separated.
func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

// checkSubscribes checks node p's subscriptions: at most
// MaxSubscriptions valid patterns, each covered by one of the pack's
// messages grant topics (abi.PatternCovers).
func checkSubscribes(c *checker, p string, subs, grant []string) {
	p += ".subscribes"
	if len(subs) > MaxSubscriptions {
		c.add(p, "%d topic patterns; a node subscribes to at most %d", len(subs), MaxSubscriptions)
		return
	}
	if !checkPatterns(c, p, subs) {
		return
	}
	for i, s := range subs {
		if !slices.ContainsFunc(grant, func(g string) bool { return abi.PatternCovers(g, s) }) {
			c.add(indexPath(p, i), "%s is not within the pack's messages grant (topics: [%s])", quote(s), quoteAll(grant))
		}
	}
}

// checkSkill checks a SkillManifest: identifiers, bounded text, and paths
// that stay inside assets/ (that the files exist is checked with the
// archive: Archive.check).
func checkSkill(c *checker, p string, s *Skill) {
	if s.SkillID != "" {
		checkIdent(c, p+".skill_id", s.SkillID, "skill_id")
	}
	checkText(c, p+".description", s.Description)
	checkNames(c, p+".tags", s.Tags, "tag")
	for _, sp := range s.Paths() {
		if reason := checkPath(sp.Path); reason != "" {
			c.add(p+"."+sp.Field, "%s (a path under %s/)", reason, AssetsDir)
		}
	}
	for _, f := range []struct{ name, v string }{{"input_schema_id", s.InputSchemaID}, {"output_schema_id", s.OutputSchemaID}} {
		if len(f.v) > maxPathLen {
			c.add(p+"."+f.name, "longer than %d characters", maxPathLen)
		}
	}
	for i, cmd := range s.CLICommands {
		ip := indexPath(p+".cli_commands", i)
		if cmd.Name == "" || len(cmd.Name) > maxNameLen {
			c.add(ip+".name", "must be 1..%d characters", maxNameLen)
		} else if slices.ContainsFunc(s.CLICommands[:i], func(x CLICommand) bool { return x.Name == cmd.Name }) {
			c.add(ip+".name", "duplicate command %s", quote(cmd.Name))
		}
		if cmd.Command == "" || len(cmd.Command) > maxTextLen {
			c.add(ip+".command", "must be 1..%d characters", maxTextLen)
		}
		checkText(c, ip+".description", cmd.Description)
	}
}

func serviceList() string {
	s := make([]string, len(services))
	for i, x := range services {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}

func checkText(c *checker, p, s string) {
	if utf8.RuneCountInString(s) > maxTextLen {
		c.add(p, "longer than %d characters", maxTextLen)
	}
}

func checkLimit(c *checker, name string, v, hi int64) {
	if v < 0 || v > hi {
		c.add("$.runtime.limits."+name, "must be between 1 and %d", hi)
	}
}

func checkIdent(c *checker, p, s, what string) bool {
	if len(s) > maxNameLen || !identPattern().MatchString(s) {
		c.add(p, "%s is not a valid %s: dot-separated segments of letters, digits, '_' and '-', at most %d characters", quote(s), what, maxNameLen)
		return false
	}
	return true
}

func checkNames(c *checker, p string, names []string, what string) {
	for i, s := range names {
		ip := indexPath(p, i)
		if checkIdent(c, ip, s, what) && slices.Contains(names[:i], s) {
			c.add(ip, "duplicate %s %s", what, quote(s))
		}
	}
}

func checkSchema(c *checker, p string, raw []byte) {
	if raw == nil {
		return
	}
	if _, err := CompileSchema(raw); err != nil {
		c.add(p, "%v", err)
	}
}

// checkPath returns why p is not acceptable as a file path inside a pack, or
// "". Accepted paths are relative, slash-separated, clean, valid UTF-8
// without control characters, backslashes or colons, and stay inside the
// pack.
func checkPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case len(p) > maxPathLen:
		return fmt.Sprintf("path longer than %d bytes", maxPathLen)
	case !utf8.ValidString(p):
		return "path is not valid UTF-8"
	case strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "path contains a control character"
	case strings.Contains(p, `\`):
		return "path contains a backslash (use forward slashes)"
	case strings.HasPrefix(p, "/"):
		return "absolute path"
	case strings.Contains(p, ":"):
		return "path contains a colon"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return "path contains a \"..\" component"
		}
		if len(seg) > maxSegmentLen {
			return fmt.Sprintf("path component longer than %d bytes", maxSegmentLen)
		}
	}
	if p == "." || path.Clean(p) != p {
		return "path is not clean (no \".\" components, repeated or trailing slashes)"
	}
	return ""
}

// validCadence reports whether s is a duration of whole seconds, at least
// one and at most a year (host.ParseEvery reads it).
func validCadence(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d >= time.Second && d%time.Second == 0 && d <= 366*24*time.Hour
}
