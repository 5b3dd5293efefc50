package registry

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/packs"
)

// PolicyVersion is the version of the trust.json format written by Save.
const PolicyVersion = 1

// Policy is the trust policy, stored as $PACKRUN_HOME/trust.json. It says
// which signers are trusted, each for which pack namespaces, and what
// provenance is required. An empty policy trusts nothing.
//
// Names are unique across keys, identities and registry keys.
//
// A namespace pattern is either an exact pack name ("vendor.acme.tools") or
// a prefix followed by ".*" ("vendor.acme.*"), which matches every name
// strictly below the prefix ("vendor.acme.tools", "vendor.acme.x.y") but not
// the prefix itself ("vendor.acme"), so that trust for an organisation's
// packs never extends to a pack named like the organisation. A bare "*" is
// not allowed: trusting a key for everything has to be spelled out
// ("vendor.*", "community.*", "local.*"). Segments are letters, digits,
// '-' and '_', starting with a lowercase letter or a digit.
type Policy struct {
	// Version is PolicyVersion; 0 (absent) is read as PolicyVersion.
	Version int `json:"version"`

	// RequireProvenance refuses packs without a valid SLSA provenance
	// bundle. True in a new policy and when trust.json omits the field.
	RequireProvenance bool `json:"requireProvenance"`

	// BuilderIDs, when not empty, lists the builder ids
	// (runDetails.builder.id) a pack's provenance may name; a non-empty
	// list also makes provenance required. Empty means any builder.
	BuilderIDs []string `json:"builderIds,omitempty"`

	// Keys are trusted Sigstore signing keys (cosign or packrun keys).
	Keys []TrustedKey `json:"keys,omitempty"`

	// Identities are trusted keyless (Fulcio certificate) signers. They
	// need TrustedRoot.
	Identities []TrustedIdentity `json:"identities,omitempty"`

	// TrustedRoot pins the Sigstore trusted root (Fulcio CAs, Rekor and CT
	// log keys, timestamp authorities) keyless bundles are verified
	// against. Verification is offline: the root is never refreshed.
	TrustedRoot *TrustedRootRef `json:"trustedRoot,omitempty"`

	// RegistryKeys are openwop registry Ed25519 keys (VerifyEd25519).
	RegistryKeys []RegistryKey `json:"registryKeys,omitempty"`

	// HTTPHosts restricts the hosts packs may name in grants.http, per
	// namespace. A pack under no rule's namespace is not restricted.
	HTTPHosts []HTTPHostRule `json:"httpHosts,omitempty"`

	// dir is the directory trust.json was loaded from; a relative
	// TrustedRoot.Path resolves against it.
	dir string
}

// TrustedKey is a public key trusted to sign packs in its namespaces.
type TrustedKey struct {
	Name       string   `json:"name"`
	PublicKey  string   `json:"publicKey"` // PKIX PEM "PUBLIC KEY": ECDSA P-256/384/521, RSA ≥ 2048 or Ed25519
	Namespaces []string `json:"namespaces"`
}

// TrustedIdentity is a keyless signer: a Fulcio certificate whose OIDC
// issuer equals Issuer and whose subject (SAN: e-mail or URI) equals
// Subject, or matches SubjectRegexp (exactly one of the two). The regexp is
// anchored: it must match the whole subject.
type TrustedIdentity struct {
	Name          string   `json:"name"`
	Issuer        string   `json:"issuer"`
	Subject       string   `json:"subject,omitempty"`
	SubjectRegexp string   `json:"subjectRegexp,omitempty"`
	Namespaces    []string `json:"namespaces"`
}

// RegistryKey is an openwop registry's Ed25519 key. PublicKey is a PKIX PEM
// "PUBLIC KEY" or the base64 of the raw 32-byte key.
type RegistryKey struct {
	Name       string   `json:"name"`
	PublicKey  string   `json:"publicKey"`
	Namespaces []string `json:"namespaces"`
}

// HTTPHostRule lets packs under Namespace (a namespace pattern) name in
// grants.http only the hosts Hosts allows: an exact host, or "*.example.com"
// for every name below example.com (and grants naming such a wildcard
// below it). A pack under several rules' namespaces may name what any of
// them allows; an empty Hosts allows none.
type HTTPHostRule struct {
	Namespace string   `json:"namespace"`
	Hosts     []string `json:"hosts"`
}

// CheckHTTPHosts refuses a pack whose grants.http names a host outside
// what the policy's rules for its namespace allow, naming the pack, the
// namespace and the host.
func (p *Policy) CheckHTTPHosts(pack string, grants []packs.HTTPGrant) error {
	var rules []HTTPHostRule
	for _, r := range p.HTTPHosts {
		if MatchNamespace(r.Namespace, pack) {
			rules = append(rules, r)
		}
	}
	if len(rules) == 0 {
		return nil
	}
	for _, g := range grants {
		host := strings.ToLower(g.Host)
		ok := false
		for _, r := range rules {
			for _, allowed := range r.Hosts {
				ok = ok || hostAllowed(strings.ToLower(allowed), host)
			}
		}
		if !ok {
			var allowed []string
			for _, r := range rules {
				allowed = append(allowed, r.Hosts...)
			}
			return refuse(pack, CheckHTTPHosts, nil, "grants.http names host %s, outside the http hosts the trust policy allows packs in namespace %s: %s",
				quote(g.Host), quote(rules[0].Namespace), list(allowed))
		}
	}
	return nil
}

// hostAllowed reports whether a policy host pattern covers a grant's host
// (itself possibly a "*." wildcard).
func hostAllowed(pattern, host string) bool {
	if pattern == host {
		return true
	}
	suffix, ok := strings.CutPrefix(pattern, "*")
	return ok && strings.HasSuffix(host, suffix) && len(host) > len(suffix)
}

// TrustedRootRef is a trusted_root.json, by path or inline. In trust.json it
// is either a string (the path; relative to trust.json's directory) or the
// trusted root object itself.
type TrustedRootRef struct {
	Path string
	JSON json.RawMessage
}

func (r TrustedRootRef) MarshalJSON() ([]byte, error) {
	if len(r.JSON) > 0 {
		return r.JSON, nil
	}
	return json.Marshal(r.Path)
}

func (r *TrustedRootRef) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case len(data) > 0 && data[0] == '"':
		r.JSON = nil
		return json.Unmarshal(data, &r.Path)
	case len(data) > 0 && data[0] == '{':
		r.Path = ""
		r.JSON = append(json.RawMessage(nil), data...)
		return nil
	}
	return errors.New("trustedRoot must be a path (string) or a trusted root (object)")
}

// TrustEntry is one line of a policy listing.
type TrustEntry struct {
	Kind       string   // "key", "identity" or "registry-key"
	Name       string   // the entry's name
	ID         string   // key id (base64 SHA-256 of the PKIX key); for identities "<issuer> <subject>" or "<issuer> ~<subjectRegexp>"
	Namespaces []string // namespace patterns it is trusted for
}

// NewPolicy returns an empty policy: it trusts no one and requires
// provenance.
func NewPolicy() *Policy {
	return &Policy{Version: PolicyVersion, RequireProvenance: true}
}

// LoadPolicy reads a trust policy. A missing file is an empty policy (see
// NewPolicy), not an error. The policy is validated.
func LoadPolicy(path string) (*Policy, error) {
	dir := filepath.Dir(path)
	data, err := readLimited(path, MaxPolicySize)
	if errors.Is(err, os.ErrNotExist) {
		p := NewPolicy()
		p.dir = dir
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load trust policy: %w", err)
	}
	p, err := parsePolicy(data)
	if err != nil {
		return nil, fmt.Errorf("load trust policy %s: %w", path, err)
	}
	p.dir = dir
	return p, nil
}

func parsePolicy(data []byte) (*Policy, error) {
	p := NewPolicy() // fields absent from the file keep the secure defaults
	p.Version = 0
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a misspelt "requireProvenance" must not silently weaken the policy
	if err := dec.Decode(p); err != nil {
		return nil, clipped{err} // an unknown field is quoted whole
	}
	if dec.More() {
		return nil, errors.New("trailing data after the policy object")
	}
	if p.Version == 0 {
		p.Version = PolicyVersion
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// Save validates the policy and writes it atomically (a temporary file in
// the same directory, synced, then renamed over path), mode 0600 (the
// directory, created if needed, 0700).
func (p *Policy) Save(path string) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("save trust policy %s: %w", path, err)
	}
	out := *p
	out.Version = PolicyVersion
	data, err := json.MarshalIndent(&out, "", "  ")
	if err != nil {
		return fmt.Errorf("save trust policy %s: %w", path, err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save trust policy: %w", err)
	}
	if err := blobs.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("save trust policy: %w", err)
	}
	p.dir = dir
	return nil
}

// AddKey trusts a Sigstore public key (PKIX PEM) for the given namespace
// patterns. It refuses a name already in use, an unusable key and invalid
// patterns.
func (p *Policy) AddKey(name string, pubPEM []byte, namespaces []string) error {
	k := TrustedKey{Name: name, PublicKey: string(pubPEM), Namespaces: namespaces}
	if err := p.checkNewName(name); err != nil {
		return fmt.Errorf("add key: %w", err)
	}
	if err := k.validate(); err != nil {
		return fmt.Errorf("add key %s: %w", name, err)
	}
	p.Keys = append(p.Keys, k)
	return nil
}

// AddIdentity trusts a keyless identity for its namespaces. The policy must
// have (or be given, before Save) a TrustedRoot.
func (p *Policy) AddIdentity(id TrustedIdentity) error {
	if err := p.checkNewName(id.Name); err != nil {
		return fmt.Errorf("add identity: %w", err)
	}
	if err := id.validate(); err != nil {
		return fmt.Errorf("add identity %s: %w", id.Name, err)
	}
	p.Identities = append(p.Identities, id)
	return nil
}

// AddRegistryKey trusts an openwop registry Ed25519 key (PKIX PEM or base64
// of the raw 32 bytes) for the given namespace patterns.
func (p *Policy) AddRegistryKey(name string, publicKey []byte, namespaces []string) error {
	k := RegistryKey{Name: name, PublicKey: strings.TrimSpace(string(publicKey)), Namespaces: namespaces}
	if err := p.checkNewName(name); err != nil {
		return fmt.Errorf("add registry key: %w", err)
	}
	if err := k.validate(); err != nil {
		return fmt.Errorf("add registry key %s: %w", name, err)
	}
	p.RegistryKeys = append(p.RegistryKeys, k)
	return nil
}

// Remove deletes the key, identity or registry key with that name, or
// returns an error matching ErrNotFound.
func (p *Policy) Remove(name string) error {
	for i := range p.Keys {
		if p.Keys[i].Name == name {
			p.Keys = append(p.Keys[:i:i], p.Keys[i+1:]...)
			return nil
		}
	}
	for i := range p.Identities {
		if p.Identities[i].Name == name {
			p.Identities = append(p.Identities[:i:i], p.Identities[i+1:]...)
			return nil
		}
	}
	for i := range p.RegistryKeys {
		if p.RegistryKeys[i].Name == name {
			p.RegistryKeys = append(p.RegistryKeys[:i:i], p.RegistryKeys[i+1:]...)
			return nil
		}
	}
	return fmt.Errorf("remove %s from trust policy: %w", quote(name), ErrNotFound)
}

// List returns every trusted signer, keys first, then identities, then
// registry keys, each in policy order.
func (p *Policy) List() []TrustEntry {
	var out []TrustEntry
	for _, k := range p.Keys {
		id := "(invalid key)"
		if pub, err := parsePublicKeyPEM([]byte(k.PublicKey)); err == nil {
			if s, err := keyID(pub); err == nil {
				id = s
			}
		}
		out = append(out, TrustEntry{Kind: "key", Name: k.Name, ID: id, Namespaces: append([]string(nil), k.Namespaces...)})
	}
	for _, i := range p.Identities {
		subj := i.Subject
		if subj == "" {
			subj = "~" + i.SubjectRegexp
		}
		out = append(out, TrustEntry{Kind: "identity", Name: i.Name, ID: i.Issuer + " " + subj, Namespaces: append([]string(nil), i.Namespaces...)})
	}
	for _, k := range p.RegistryKeys {
		id := "(invalid key)"
		if pub, err := parseEd25519Key(k.PublicKey); err == nil {
			if s, err := keyID(pub); err == nil {
				id = s
			}
		}
		out = append(out, TrustEntry{Kind: "registry-key", Name: k.Name, ID: id, Namespaces: append([]string(nil), k.Namespaces...)})
	}
	return out
}

// Validate checks the whole policy: unique valid names, parsable keys,
// valid namespace patterns and regexps, and a trusted root when there are
// keyless identities.
func (p *Policy) Validate() error {
	if p.Version != 0 && p.Version != PolicyVersion {
		return fmt.Errorf("policy version %d is not supported (want %d)", p.Version, PolicyVersion)
	}
	seen := map[string]bool{}
	check := func(kind, name string, err error) error {
		if e := validateEntryName(name); e != nil {
			return fmt.Errorf("%s %s: %w", kind, quote(name), e)
		}
		if seen[name] {
			return fmt.Errorf("%s %s: name used twice", kind, quote(name))
		}
		seen[name] = true
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, quote(name), err)
		}
		return nil
	}
	for _, k := range p.Keys {
		if err := check("key", k.Name, k.validate()); err != nil {
			return err
		}
	}
	for _, i := range p.Identities {
		if err := check("identity", i.Name, i.validate()); err != nil {
			return err
		}
	}
	for _, k := range p.RegistryKeys {
		if err := check("registry key", k.Name, k.validate()); err != nil {
			return err
		}
	}
	for i, r := range p.HTTPHosts {
		if err := ValidatePattern(r.Namespace); err != nil {
			return fmt.Errorf("httpHosts[%d]: %w", i, err)
		}
		for _, h := range r.Hosts {
			if err := packs.CheckHTTPHost(h); err != nil {
				return fmt.Errorf("httpHosts[%d] (namespace %s): host %w", i, r.Namespace, err)
			}
		}
	}
	if r := p.TrustedRoot; r != nil && len(r.JSON) > 0 && !json.Valid(r.JSON) {
		return errors.New("trustedRoot: inline trusted root is not valid JSON")
	}
	if len(p.Identities) > 0 && (p.TrustedRoot == nil || (p.TrustedRoot.Path == "" && len(p.TrustedRoot.JSON) == 0)) {
		return errors.New("keyless identities need a trustedRoot (path to trusted_root.json or the object inline)")
	}
	for _, b := range p.BuilderIDs {
		if strings.TrimSpace(b) == "" {
			return errors.New("builderIds: empty builder id")
		}
	}
	return nil
}

func (p *Policy) checkNewName(name string) error {
	if err := validateEntryName(name); err != nil {
		return fmt.Errorf("name %s: %w", quote(name), err)
	}
	for _, e := range p.List() {
		if e.Name == name {
			return fmt.Errorf("name %s: %w in the trust policy (%s)", quote(name), ErrExists, e.Kind)
		}
	}
	return nil
}

// DevKeyName is the trust policy entry of a home's development key (the key
// packrun dev signs with). Whatever trust.json says, that entry may only be
// trusted for names under DevNamespace: a policy giving it any other pattern
// is refused when it is added, loaded or saved.
const DevKeyName = "packrun-dev"

// DevNamespace is the only namespace pattern DevKeyName may be trusted for.
const DevNamespace = "local.*"

func (k TrustedKey) validate() error {
	if _, err := parsePublicKeyPEM([]byte(k.PublicKey)); err != nil {
		return fmt.Errorf("publicKey: %w", err)
	}
	if err := validatePatterns(k.Namespaces); err != nil {
		return err
	}
	if k.Name == DevKeyName {
		for _, pat := range k.Namespaces {
			if pat != DevNamespace && !MatchNamespace(DevNamespace, strings.TrimSuffix(pat, ".*")) {
				return fmt.Errorf("namespace pattern %s: the development key %s is trusted only for %s", quote(pat), quote(DevKeyName), DevNamespace)
			}
		}
	}
	return nil
}

func (i TrustedIdentity) validate() error {
	if i.Issuer == "" {
		return errors.New("issuer is required")
	}
	if (i.Subject == "") == (i.SubjectRegexp == "") {
		return errors.New("exactly one of subject and subjectRegexp is required")
	}
	if i.SubjectRegexp != "" {
		if _, err := regexp.Compile(anchor(i.SubjectRegexp)); err != nil {
			return fmt.Errorf("subjectRegexp: %w", err)
		}
	}
	return validatePatterns(i.Namespaces)
}

func (k RegistryKey) validate() error {
	if _, err := parseEd25519Key(k.PublicKey); err != nil {
		return fmt.Errorf("publicKey: %w", err)
	}
	return validatePatterns(k.Namespaces)
}

// anchor makes a subject regexp match whole subjects only: sigstore-go
// (like Go's regexp) matches anywhere in the string, so an unanchored
// "alice@acme.com" would accept "alice@acme.com.evil.example".
func anchor(re string) string { return `^(?:` + re + `)$` }

// parseEd25519Key reads a registry key: PKIX PEM, or base64 of 32 raw bytes.
func parseEd25519Key(s string) (ed25519.PublicKey, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		pub, err := parsePublicKeyPEM([]byte(s))
		if err != nil {
			return nil, err
		}
		k, ok := pub.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("registry key is %T, want Ed25519", pub)
		}
		return k, nil
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not PEM and not base64: %w", err)
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("raw Ed25519 key is %d bytes, want %d", len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

func validateEntryName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	if len(name) > 128 {
		return errors.New("name longer than 128 bytes")
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return errors.New("name contains whitespace or control characters")
		}
	}
	return nil
}

// segmentRE is one segment of a pack name: packrun's grammar and openwop's
// (whose later segments may hold capitals, as in vendor.acme.fooBar).
var segmentRE = lazyRegexp(`^[a-z0-9][a-zA-Z0-9_-]*$`)

// validatePackName checks the shape namespace matching relies on: dot
// separated segments of lowercase letters, digits, '-' and '_'.
func validatePackName(name string) error {
	if name == "" {
		return errors.New("empty pack name")
	}
	if len(name) > maxNameLength {
		return fmt.Errorf("pack name longer than %d bytes", maxNameLength)
	}
	for _, seg := range strings.Split(name, ".") {
		if !segmentRE().MatchString(seg) {
			return fmt.Errorf("pack name %s: segment %s is not [a-z0-9][a-zA-Z0-9_-]*", quote(name), quote(seg))
		}
	}
	return nil
}

// ValidatePattern reports whether a namespace pattern is well formed: an
// exact pack name, or a name prefix followed by ".*".
func ValidatePattern(pattern string) error {
	prefix, wild := strings.CutSuffix(pattern, ".*")
	if pattern == "*" || (wild && prefix == "") {
		return fmt.Errorf("namespace pattern %s: a bare * is not allowed; list the top-level namespaces (vendor.*, community.*, local.*)", quote(pattern))
	}
	if strings.Contains(prefix, "*") {
		return fmt.Errorf("namespace pattern %s: * is only allowed as the last segment (prefix.*)", quote(pattern))
	}
	if err := validatePackName(prefix); err != nil {
		return fmt.Errorf("namespace pattern %s: %w", quote(pattern), err)
	}
	return nil
}

func validatePatterns(patterns []string) error {
	if len(patterns) == 0 {
		return errors.New("no namespaces: an entry must be limited to at least one namespace pattern")
	}
	if len(patterns) > maxNamespacePatterns {
		return fmt.Errorf("more than %d namespace patterns", maxNamespacePatterns)
	}
	for _, pat := range patterns {
		if err := ValidatePattern(pat); err != nil {
			return err
		}
	}
	return nil
}

// MatchNamespace reports whether a pack name falls under a namespace
// pattern: the exact name, or, for "prefix.*", any name strictly below
// prefix.
func MatchNamespace(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok && strings.HasSuffix(prefix, ".") {
		return len(name) > len(prefix) && strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

func permitted(patterns []string, name string) bool {
	for _, p := range patterns {
		if ValidatePattern(p) == nil && MatchNamespace(p, name) {
			return true
		}
	}
	return false
}

func (p *Policy) resolve(path string) string {
	if filepath.IsAbs(path) || p.dir == "" {
		return path
	}
	return filepath.Join(p.dir, path)
}
