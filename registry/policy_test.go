package registry

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/packrun/packrun/packs"
)

func TestNamespacePatterns(t *testing.T) {
	valid := []string{"vendor.acme.*", "vendor.acme.tools", "local.x", "vendor.*", "community.a-b_c.*", "x"}
	invalid := []string{"", "*", ".*", "vendor.*.x", "vendor.acme*", "Vendor.acme.*", "vendor..acme", "vendor.acme.",
		".vendor", "vendor acme", "vendor.acme.**", "vendor/acme", "-vendor.x", strings.Repeat("a", 256)}
	for _, p := range valid {
		if err := ValidatePattern(p); err != nil {
			t.Errorf("ValidatePattern(%q) = %v, want ok", p, err)
		}
	}
	for _, p := range invalid {
		if err := ValidatePattern(p); err == nil {
			t.Errorf("ValidatePattern(%q) = nil, want error", p)
		}
	}

	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"vendor.acme.*", "vendor.acme.tools", true},
		{"vendor.acme.*", "vendor.acme.tools.extra", true},
		{"vendor.acme.*", "vendor.acme", false},
		{"vendor.acme.*", "vendor.acmecorp.tools", false},
		{"vendor.acme.*", "vendor.other.tools", false},
		{"vendor.acme.tools", "vendor.acme.tools", true},
		{"vendor.acme.tools", "vendor.acme.tools2", false},
		{"vendor.acme.tools", "vendor.acme.tools.x", false},
		{"vendor.*", "vendor.acme.tools", true},
	}
	for _, tt := range tests {
		if got := MatchNamespace(tt.pattern, tt.name); got != tt.want {
			t.Errorf("MatchNamespace(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestPolicyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "home", "trust.json")

	p, err := LoadPolicy(path)
	if err != nil {
		t.Fatalf("LoadPolicy(missing): %v", err)
	}
	if !p.RequireProvenance || len(p.List()) != 0 {
		t.Fatalf("missing file gave %+v, want an empty policy requiring provenance", p)
	}

	k1, k2 := newTestKey(t), newTestKey(t)
	if err := p.AddKey("acme", k1.pubPEM, []string{"vendor.acme.*"}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddKey("bob", k2.pubPEM, []string{"community.bob.*", "local.bob"}); err != nil {
		t.Fatal(err)
	}
	p.TrustedRoot = &TrustedRootRef{Path: "trusted_root.json"}
	if err := p.AddIdentity(TrustedIdentity{Name: "ci", Issuer: "https://token.actions.githubusercontent.com",
		SubjectRegexp: `https://github\.com/acme/packs/\.github/workflows/release\.yml@refs/tags/v.*`, Namespaces: []string{"vendor.acme.*"}}); err != nil {
		t.Fatal(err)
	}
	if err := p.AddRegistryKey("openwop", []byte("11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="), []string{"community.*"}); err != nil {
		t.Fatal(err)
	}
	p.BuilderIDs = []string{"https://ci.example/b"}

	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("trust.json mode %v, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("directory has %d entries after Save, want only trust.json (temp file left behind?)", len(entries))
	}

	q, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("round trip changed the policy:\n got %+v\nwant %+v", q, p)
	}
	var kinds []string
	for _, e := range q.List() {
		kinds = append(kinds, e.Kind+":"+e.Name)
		if e.ID == "" || e.ID == "(invalid key)" || len(e.Namespaces) == 0 {
			t.Errorf("List entry %+v", e)
		}
	}
	if got := strings.Join(kinds, " "); got != "key:acme key:bob identity:ci registry-key:openwop" {
		t.Errorf("List = %s", got)
	}

	// Names are unique across kinds.
	for _, name := range []string{"acme", "ci", "openwop"} {
		if err := q.AddKey(name, k2.pubPEM, []string{"local.x"}); !errors.Is(err, ErrExists) {
			t.Errorf("AddKey(duplicate %q) = %v, want ErrExists", name, err)
		}
	}
	if err := q.Remove("bob"); err != nil {
		t.Fatal(err)
	}
	if err := q.Remove("bob"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove twice = %v, want ErrNotFound", err)
	}
	if err := q.Remove("ci"); err != nil {
		t.Fatal(err)
	}
	if err := q.Remove("openwop"); err != nil {
		t.Fatal(err)
	}
	if err := q.Save(path); err != nil {
		t.Fatal(err)
	}
	r, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if l := r.List(); len(l) != 1 || l[0].Name != "acme" {
		t.Errorf("after removals: %+v", l)
	}
	// p was not affected by removals from q's slices.
	if len(p.List()) != 4 {
		t.Errorf("removing from a loaded copy changed the original: %+v", p.List())
	}
}

func TestPolicyRejects(t *testing.T) {
	k := newTestKey(t)
	addKey := []struct {
		name       string
		entry      string
		pem        []byte
		namespaces []string
	}{
		{"no namespaces", "a", k.pubPEM, nil},
		{"bare star", "a", k.pubPEM, []string{"*"}},
		{"star in the middle", "a", k.pubPEM, []string{"vendor.*.x"}},
		{"uppercase pattern", "a", k.pubPEM, []string{"Vendor.acme.*"}},
		{"empty name", "", k.pubPEM, []string{"local.x"}},
		{"name with space", "a b", k.pubPEM, []string{"local.x"}},
		{"not PEM", "a", []byte("hello"), []string{"local.x"}},
		{"private key PEM", "a", []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), []string{"local.x"}},
		{"two PEM blocks", "a", append(append([]byte{}, k.pubPEM...), k.pubPEM...), []string{"local.x"}},
	}
	for _, tt := range addKey {
		t.Run("AddKey "+tt.name, func(t *testing.T) {
			p := NewPolicy()
			if err := p.AddKey(tt.entry, tt.pem, tt.namespaces); err == nil {
				t.Fatal("accepted")
			} else {
				t.Log(err)
			}
			if len(p.Keys) != 0 {
				t.Error("a refused key was added")
			}
		})
	}
	ids := []struct {
		name string
		id   TrustedIdentity
	}{
		{"no issuer", TrustedIdentity{Name: "i", Subject: "a@b", Namespaces: []string{"local.x"}}},
		{"no subject", TrustedIdentity{Name: "i", Issuer: "https://x", Namespaces: []string{"local.x"}}},
		{"subject and regexp", TrustedIdentity{Name: "i", Issuer: "https://x", Subject: "a", SubjectRegexp: "a", Namespaces: []string{"local.x"}}},
		{"bad regexp", TrustedIdentity{Name: "i", Issuer: "https://x", SubjectRegexp: "(", Namespaces: []string{"local.x"}}},
		{"bad pattern", TrustedIdentity{Name: "i", Issuer: "https://x", Subject: "a", Namespaces: []string{"local.*.*"}}},
	}
	for _, tt := range ids {
		t.Run("AddIdentity "+tt.name, func(t *testing.T) {
			if err := NewPolicy().AddIdentity(tt.id); err == nil {
				t.Fatal("accepted")
			}
		})
	}

	files := []struct {
		name, json string
	}{
		{"unknown field (typo)", `{"version":1,"requireProvenence":false}`},
		{"future version", `{"version":2}`},
		{"invalid key", `{"keys":[{"name":"k","publicKey":"x","namespaces":["local.x"]}]}`},
		{"duplicate names", `{"keys":[{"name":"k","publicKey":` + jsonString(k.pubPEM) + `,"namespaces":["local.x"]},{"name":"k","publicKey":` + jsonString(k.pubPEM) + `,"namespaces":["local.y"]}]}`},
		{"identity without root", `{"identities":[{"name":"i","issuer":"https://x","subject":"a","namespaces":["local.x"]}]}`},
		{"trustedRoot of the wrong type", `{"trustedRoot":42}`},
		{"httpHosts bare star namespace", `{"httpHosts":[{"namespace":"*","hosts":["api.example.com"]}]}`},
		{"httpHosts host with a path", `{"httpHosts":[{"namespace":"vendor.acme.*","hosts":["api.example.com/v1"]}]}`},
		{"httpHosts inner wildcard", `{"httpHosts":[{"namespace":"vendor.acme.*","hosts":["api.*.com"]}]}`},
		{"httpHosts unknown field", `{"httpHosts":[{"namespace":"vendor.acme.*","host":["api.example.com"]}]}`},
		{"not JSON", `trust everyone`},
		{"trailing data", `{} {}`},
	}
	for _, tt := range files {
		t.Run("LoadPolicy "+tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "trust.json")
			if err := os.WriteFile(path, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadPolicy(path); err == nil {
				t.Fatal("accepted")
			} else {
				t.Log(err)
			}
		})
	}

	t.Run("requireProvenance defaults to true when absent", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "trust.json")
		for js, want := range map[string]bool{`{}`: true, `{"requireProvenance":false}`: false, `{"requireProvenance":true}`: true} {
			if err := os.WriteFile(path, []byte(js), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := LoadPolicy(path)
			if err != nil {
				t.Fatal(err)
			}
			if p.RequireProvenance != want {
				t.Errorf("%s: RequireProvenance = %v, want %v", js, p.RequireProvenance, want)
			}
		}
	})

	t.Run("Save refuses an invalid policy and keeps the old file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "trust.json")
		good := NewPolicy()
		if err := good.AddKey("k", k.pubPEM, []string{"local.x"}); err != nil {
			t.Fatal(err)
		}
		if err := good.Save(path); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(path)
		bad := NewPolicy()
		bad.Keys = []TrustedKey{{Name: "k", PublicKey: "junk", Namespaces: []string{"local.x"}}}
		if err := bad.Save(path); err == nil {
			t.Fatal("saved an invalid policy")
		}
		after, _ := os.ReadFile(path)
		if string(before) != string(after) {
			t.Error("failed Save changed trust.json")
		}
	})
}

func jsonString(b []byte) string {
	s := strings.ReplaceAll(string(b), "\n", `\n`)
	return `"` + s + `"`
}

// A policy's httpHosts rules restrict, per namespace, the hosts a pack's
// grants.http may name: exact hosts, wildcards covering names (and narrower
// wildcards) below them, several rules for one pack adding up; a pack under
// no rule is unrestricted. A refusal names the pack, the namespace and the
// host. The rules survive Save and LoadPolicy.
func TestPolicyHTTPHosts(t *testing.T) {
	p := NewPolicy()
	p.HTTPHosts = []HTTPHostRule{
		{Namespace: "vendor.acme.*", Hosts: []string{"api.acme.com", "*.cdn.acme.net"}},
		{Namespace: "vendor.acme.tools", Hosts: []string{"127.0.0.1"}},
		{Namespace: "community.*", Hosts: []string{}},
	}
	path := filepath.Join(t.TempDir(), "trust.json")
	if err := p.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded.HTTPHosts) != 3 || loaded.HTTPHosts[0].Hosts[1] != "*.cdn.acme.net" {
		t.Fatalf("httpHosts after Save and LoadPolicy: %+v", loaded.HTTPHosts)
	}
	grant := func(hosts ...string) []packs.HTTPGrant {
		var g []packs.HTTPGrant
		for _, h := range hosts {
			g = append(g, packs.HTTPGrant{Host: h})
		}
		return g
	}
	for _, tc := range []struct {
		pack  string
		hosts []string
		want  string // "" accepted, else in the refusal
	}{
		{"vendor.acme.mail", []string{"api.acme.com", "img.cdn.acme.net", "*.eu.cdn.acme.net"}, ""},
		{"vendor.acme.tools", []string{"api.acme.com", "127.0.0.1"}, ""},
		{"vendor.other.x", []string{"evil.example.com"}, ""},
		{"vendor.acme.mail", nil, ""},
		{"vendor.acme.mail", []string{"api.acme.com", "evil.example.com"}, `verify vendor.acme.mail: http-hosts: grants.http names host "evil.example.com", outside the http hosts the trust policy allows packs in namespace "vendor.acme.*": ["api.acme.com" "*.cdn.acme.net"]`},
		{"vendor.acme.mail", []string{"*.acme.net"}, `names host "*.acme.net"`},
		{"vendor.acme.mail", []string{"cdn.acme.net"}, `names host "cdn.acme.net"`},
		{"vendor.acme.mail", []string{"127.0.0.1"}, `names host "127.0.0.1"`},
		{"community.x", []string{"api.acme.com"}, `namespace "community.*": []`},
	} {
		err := loaded.CheckHTTPHosts(tc.pack, grant(tc.hosts...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tc.pack, tc.hosts, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrUntrusted)):
			t.Errorf("%s %v: err = %v, want an ErrUntrusted containing %s", tc.pack, tc.hosts, err, tc.want)
		}
	}
}
