package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/hosttest"
)

// openwop's pack-registry.test.ts (openwop/openwop@4f7db1d1dd), ported:
// its regular expressions, its probe names and what it asserts of each
// read. It reads without a token, so serve runs with
// --public-pack-registry; without it the same reads need a token.

var (
	owPackNameRE = regexp.MustCompile(`^(core|vendor|community|private)\.[a-z][a-z0-9_-]*(\.[a-z][a-zA-Z0-9_-]*)+$`)
	owSemverRE   = regexp.MustCompile(`^\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$`)
)

// rawGet is a GET with an optional bearer token, answering the status,
// the headers and the body (owCall).
func rawGet(t *testing.T, u, token string) (int, http.Header, []byte) {
	t.Helper()
	a := owCall(t, u, token, http.MethodGet, "", "")
	return a.code, a.header, []byte(a.text)
}

// owErrorCode is the error of openwop's envelope in b, "" when b is not one.
func owErrorCode(b []byte) string {
	var env struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &env) != nil || env.Message == "" {
		return ""
	}
	s, _ := env.Error.(string)
	return s
}

func TestOpenwopRegistryScenarios(t *testing.T) {
	hosttest.NeedCommand(t, hosttest.Getenv("WAT2WASM", "wat2wasm"), "wabt not available (apt-get install wabt, or set WAT2WASM)")
	dir := t.TempDir()
	h := homeCLI{t, filepath.Join(dir, "home")}
	key := newToken(h, "default", "tasks:read")
	bin := packrunBinary(t)
	// rust-hello as the registry publishes it (a detached signature over
	// the tarball), and openwop's unsigned memory fixture.
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p := owPublisher{t, dir, priv}
	h.ok("trust", "add-registry-key", owRegistryKeyID, base64.StdEncoding.EncodeToString(pub), "--namespace", "vendor.openwop.*")
	args := p.registryV1(owRustHello)
	h.ok(append([]string{"install"}, args...)...)
	tgz, err := os.ReadFile(args[0])
	if err != nil {
		t.Fatal(err)
	}
	sig, err := os.ReadFile(args[0] + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	h.ok(append([]string{"install"}, p.fixture(owMemoryBomb)...)...)

	serve := func(flags ...string) (string, func()) {
		s := startServeWith(t, bin, h.home, flags...)
		s.waitUp(t)
		m := regexp.MustCompile(`packrun serving on (http://\S+)`).FindStringSubmatch(s.logs.String())
		return m[1], func() {
			s.Process.Signal(syscall.SIGTERM)
			s.Wait()
		}
	}
	discovery := func(t *testing.T, base string) map[string]any {
		t.Helper()
		_, d := anonGet(t, base+"/.well-known/openwop")
		packs, _ := d["packs"].(map[string]any)
		reg, _ := packs["registry"].(map[string]any)
		caps, _ := d["capabilities"].(map[string]any)
		if reg["supported"] != true || reg["publish"] != false || caps["packs"] == nil {
			t.Fatalf("discovery's packs: %v (capabilities: %v)", d["packs"], caps["packs"])
		}
		return reg
	}

	// Without --public-pack-registry: a token of any scope reads it, none
	// is a 401 in openwop's envelope.
	t.Run("token-needed", func(t *testing.T) {
		base, stop := serve()
		defer stop()
		if reg := discovery(t, base); reg["anonymousRead"] != false {
			t.Fatalf("anonymousRead %v without --public-pack-registry", reg["anonymousRead"])
		}
		code, _, b := rawGet(t, base+"/v1/packs/-/search?q=", "")
		if code != http.StatusUnauthorized || owErrorCode(b) != "unauthenticated" {
			t.Fatalf("no token: %d %s", code, b)
		}
		code, _, b = rawGet(t, base+"/v1/packs/-/search?q=rust", key)
		if code != http.StatusOK || !strings.Contains(string(b), `"vendor.openwop.rust-hello"`) {
			t.Fatalf("with a tasks:read token: %d %s", code, b)
		}
	})

	base, stop := serve("--public-pack-registry")
	defer stop()
	get := func(t *testing.T, path string) (int, http.Header, []byte) {
		t.Helper()
		return rawGet(t, base+path, "") // the scenario's {authenticated: false}
	}
	if reg := discovery(t, base); reg["anonymousRead"] != true {
		t.Fatalf("anonymousRead %v with --public-pack-registry", reg["anonymousRead"])
	}
	nonexistent := "private.conformance-probe.does-not-exist-" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	const nonexistentVersion = "0.0.0-conformance"

	// The probe: a JSON answer with results (or an error) means a registry.
	var results []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	t.Run("search", func(t *testing.T) {
		code, hdr, b := get(t, "/v1/packs/-/search?q=")
		var body struct {
			Results *json.RawMessage `json:"results"`
		}
		if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") || json.Unmarshal(b, &body) != nil || body.Results == nil {
			t.Fatalf("probe: %d %s", code, b)
		}
		if err := json.Unmarshal(*body.Results, &results); err != nil {
			t.Fatal(err)
		}
		// Beyond the scenario: both installed packs, and a query narrows.
		if len(results) != 2 {
			t.Fatalf("results %s, want rust-hello and the fixture", b)
		}
		if _, _, b := get(t, "/v1/packs/-/search?q=RUST"); strings.Count(string(b), `"name"`) != 1 || !strings.Contains(string(b), "rust-hello") {
			t.Fatalf("q=RUST: %s", b)
		}
	})
	t.Run("unknown-pack-404", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/"+url.PathEscape(nonexistent))
		if code != http.StatusNotFound || owErrorCode(b) == "" {
			t.Fatalf("%d %s", code, b)
		}
	})
	t.Run("unknown-version-404", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/"+url.PathEscape(nonexistent)+"/-/"+nonexistentVersion+".json")
		if code != http.StatusNotFound || owErrorCode(b) == "" {
			t.Fatalf("%d %s", code, b)
		}
	})
	t.Run("unknown-signature-404", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/"+url.PathEscape(nonexistent)+"/-/"+nonexistentVersion+".sig")
		if code != http.StatusNotFound || owErrorCode(b) != "signature_not_available" {
			t.Fatalf("%d %s", code, b)
		}
	})
	t.Run("bad-name-400", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/not-reverse-dns/-/1.0.json")
		if code != http.StatusBadRequest || owErrorCode(b) != "invalid_pack_name" {
			t.Fatalf("%d %s", code, b)
		}
	})
	t.Run("bad-version-400", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/"+url.PathEscape(nonexistent)+"/-/not-a-version.json")
		if code != http.StatusBadRequest || owErrorCode(b) != "invalid_version" {
			t.Fatalf("%d %s", code, b)
		}
	})
	t.Run("catalog-shape", func(t *testing.T) {
		if len(results) == 0 {
			t.Fatal("no search results to walk")
		}
		for _, r := range results {
			if !owPackNameRE.MatchString(r.Name) {
				t.Errorf("result name %q is not reverse-DNS", r.Name)
			}
			code, _, b := get(t, "/v1/packs/"+url.PathEscape(r.Name))
			var cat struct {
				Name     string                     `json:"name"`
				Versions map[string]json.RawMessage `json:"versions"`
				DistTags map[string]string          `json:"dist-tags"`
			}
			if code != http.StatusOK || json.Unmarshal(b, &cat) != nil || cat.Name != r.Name || cat.Versions == nil {
				t.Fatalf("catalog of %s: %d %s", r.Name, code, b)
			}
			for v := range cat.Versions {
				if !owSemverRE.MatchString(v) {
					t.Errorf("version key %q is not SemVer", v)
				}
			}
			if _, ok := cat.Versions[cat.DistTags["latest"]]; !ok || cat.DistTags["latest"] != r.Version {
				t.Errorf("latest %q of %s: %s", cat.DistTags["latest"], r.Name, b)
			}
		}
	})
	t.Run("keychain", func(t *testing.T) {
		code, _, b := get(t, "/v1/packs/"+url.PathEscape(results[0].Name)+"/-/keychain")
		if code != http.StatusNotFound || owErrorCode(b) == "" {
			t.Fatalf("%d %s", code, b) // 200 {keys} or 404: packrun publishes no keychain
		}
	})

	// Beyond the scenario: the files a registry client downloads are the
	// bytes installed, with their digest.
	t.Run("downloads", func(t *testing.T) {
		const rh = "/v1/packs/vendor.openwop.rust-hello"
		_, _, b := get(t, rh)
		var cat struct {
			Versions map[string]struct {
				Dist struct {
					Tarball, Signature, Integrity, Shasum string
				}
				Signer string
			}
		}
		if err := json.Unmarshal(b, &cat); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(tgz)
		v := cat.Versions["1.0.0"]
		if v.Dist.Shasum != hex.EncodeToString(sum[:]) || v.Dist.Integrity != "sha256-"+base64.StdEncoding.EncodeToString(sum[:]) ||
			v.Dist.Tarball != rh+"/-/1.0.0.tgz" || v.Dist.Signature != rh+"/-/1.0.0.sig" || !strings.Contains(v.Signer, owRegistryKeyID) {
			t.Fatalf("version 1.0.0: %s", b)
		}
		code, hdr, got := get(t, v.Dist.Tarball)
		if code != http.StatusOK || string(got) != string(tgz) || hdr.Get("Content-Type") != "application/octet-stream" || hdr.Get("X-Pack-Sha256") != v.Dist.Shasum {
			t.Fatalf("tarball: %d %v (%d bytes, want %d)", code, hdr, len(got), len(tgz))
		}
		code, _, got = get(t, rh+"/-/1.0.0.sig")
		if code != http.StatusOK || strings.TrimSpace(string(got)) != strings.TrimSpace(string(sig)) {
			t.Fatalf("signature: %d %q, want %q", code, got, sig)
		}
		code, hdr, got = get(t, rh+"/-/1.0.0.json")
		var m struct{ Name, Version string }
		if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" || json.Unmarshal(got, &m) != nil || m.Name != "vendor.openwop.rust-hello" || m.Version != "1.0.0" {
			t.Fatalf("pack.json: %d %s", code, got)
		}
		// The fixture was installed unsigned: no signature to serve.
		code, _, got = get(t, "/v1/packs/vendor.openwop.misbehaving/-/2.0.0.sig")
		if code != http.StatusNotFound || owErrorCode(got) != "signature_not_available" {
			t.Fatalf("the unsigned fixture's signature: %d %s", code, got)
		}
	})
}
