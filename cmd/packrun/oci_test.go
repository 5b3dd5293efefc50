package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/packrun/packrun/internal/testing/ocitest"
)

// ociFixture is a signed hello-c pack, a home that trusts its key, and a
// registry.
type ociFixture struct {
	dir, pack, key string
	packDigest     string // sha256:<hex> of the .pack file
	reg            *ocitest.Registry
}

func newOCIFixture(t *testing.T) *ociFixture {
	t.Helper()
	dir := t.TempDir()
	f := &ociFixture{dir: dir, pack: filepath.Join(dir, "hello.pack"), key: filepath.Join(dir, "acme")}
	signer := homeCLI{t, filepath.Join(dir, "signer")}
	signer.ok("keys", "generate", "--out", f.key)
	signer.ok("pack", "../../examples/hello-c", "-o", f.pack)
	signer.ok("sign", f.pack, "--key", f.key+".key", "--builder-id", "https://ci.example/b")
	b, err := os.ReadFile(f.pack)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	f.packDigest = "sha256:" + hex.EncodeToString(sum[:])
	f.reg = ocitest.Start(t, ocitest.Options{})
	return f
}

// home is a fresh home trusting the fixture's key for local.*.
func (f *ociFixture) home(t *testing.T, name string) homeCLI {
	h := homeCLI{t, filepath.Join(f.dir, name)}
	h.ok("trust", "add-key", "acme", f.key+".pub", "--namespace", "local.*")
	return h
}

// assertNothingStored fails unless the home has no pack and no blob.
func assertNothingStored(t *testing.T, h homeCLI) {
	t.Helper()
	if out := strings.TrimSpace(h.ok("list", "--json")); out != "[]" {
		t.Fatalf("packs installed: %s", out)
	}
	n := 0
	filepath.WalkDir(filepath.Join(h.home, "blobs"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	if n != 0 {
		t.Fatalf("%d blobs stored in the home", n)
	}
}

// oneLineErr fails unless a command failed with exit code want and one
// line on stderr.
func oneLineErr(t *testing.T, what string, code int, errs string, want int) {
	t.Helper()
	if code != want || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "packrun: ") {
		t.Fatalf("%s: exit %d (want %d), stderr %q", what, code, want, errs)
	}
}

func TestOCIPushInstallRoundTrip(t *testing.T) {
	f := newOCIFixture(t)
	signer := f.home(t, "signer")
	ref := f.reg.Addr + "/packs/hello"

	// push a file; the tag defaults to the version.
	pinned := strings.TrimSpace(signer.ok("push", f.pack, ref))
	if !strings.HasPrefix(pinned, ref+"@sha256:") {
		t.Fatalf("push printed %q", pinned)
	}
	manifestDigest := strings.TrimPrefix(pinned, ref+"@")
	// distribution 2.8 has no referrers API: the bundles are indexed
	// under the fallback tag.
	tags := strings.Join(f.reg.Tags(t, "packs/hello"), " ")
	if !strings.Contains(tags, "1.0.0") || !strings.Contains(tags, strings.Replace(manifestDigest, ":", "-", 1)) {
		t.Fatalf("tags %q: want 1.0.0 and the referrers tag of %s", tags, manifestDigest)
	}
	// an installed pack pushes to the same digest (no time in the manifests).
	signer.ok("install", f.pack)
	if again := strings.TrimSpace(signer.ok("push", "local.hello.c@1.0.0", ref+":again")); again != ref+"@"+manifestDigest {
		t.Fatalf("push of the installed pack: %s, want %s", again, pinned)
	}

	h := f.home(t, "home")
	for _, r := range []string{"oci://" + ref + ":1.0.0", "oci://" + pinned, "oci://" + ref + ":1.0.0@" + manifestDigest} {
		if out := h.ok("install", r); !strings.Contains(out, "local.hello.c@1.0.0") {
			t.Fatalf("install %s: %s", r, out)
		}
	}
	if out := h.ok("invoke", "local.hello.c", "--input", `{"name":"oci"}`); out != `{"greeting":"Hello, oci!"}`+"\n" {
		t.Fatalf("invoke: %q", out)
	}
	var list []struct{ Signer string }
	if err := json.Unmarshal([]byte(h.ok("list", "--json")), &list); err != nil || len(list) != 1 || list[0].Signer != "key:acme" {
		t.Fatalf("list: %v %+v", err, list)
	}

	// A digest the registry does not hold under that name: not found.
	other := "sha256:" + strings.Repeat("ab", 32)
	fresh := f.home(t, "fresh")
	code, _, errs := fresh.run("install", "oci://"+ref+"@"+other)
	oneLineErr(t, "unknown digest", code, errs, exitNotFound)
	assertNothingStored(t, fresh)

	// An untrusted signer: refused, nothing stored.
	untrusted := homeCLI{t, filepath.Join(f.dir, "untrusted")}
	code, _, errs = untrusted.run("install", "oci://"+pinned)
	oneLineErr(t, "untrusted", code, errs, exitRefused)
	assertNothingStored(t, untrusted)

	// pull: verified, then written with its bundles beside it.
	out := filepath.Join(f.dir, "pulled.pack")
	if got := h.ok("pull", pinned, "-o", out); !strings.Contains(got, "signed by key:acme") {
		t.Fatalf("pull: %s", got)
	}
	orig, _ := os.ReadFile(f.pack)
	if b, _ := os.ReadFile(out); string(b) != string(orig) {
		t.Fatal("pulled pack differs from the pushed one")
	}
	if got := h.ok("verify", out); !strings.Contains(got, "verified local.hello.c@1.0.0") || !strings.Contains(got, "builder https://ci.example/b") {
		t.Fatalf("verify of the pulled pack: %s", got)
	}
	if code, _, errs := untrusted.run("pull", pinned, "-o", filepath.Join(f.dir, "no.pack")); code != exitRefused {
		t.Fatalf("untrusted pull: exit %d %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(f.dir, "no.pack")); err == nil {
		t.Fatal("an untrusted pull wrote the pack")
	}

	// A pack pushed without provenance pulls over a path with a stale
	// provenance bundle beside it: the stale file goes.
	bare := filepath.Join(f.dir, "bare", "hello.pack")
	os.MkdirAll(filepath.Dir(bare), 0o755)
	for _, suffix := range []string{"", ".sigstore.json"} {
		b, _ := os.ReadFile(f.pack + suffix)
		os.WriteFile(bare+suffix, b, 0o644)
	}
	barePinned := strings.TrimSpace(signer.ok("push", bare, f.reg.Addr+"/packs/bare"))
	stale := filepath.Join(f.dir, "stale.pack")
	os.WriteFile(stale+".provenance.sigstore.json", []byte("{}"), 0o644)
	// (a policy that does not require provenance)
	noprov := f.home(t, "noprov")
	trustFile := filepath.Join(noprov.home, "trust.json")
	tb, _ := os.ReadFile(trustFile)
	os.WriteFile(trustFile, []byte(strings.Replace(string(tb), `"requireProvenance": true`, `"requireProvenance": false`, 1)), 0o600)
	noprov.ok("pull", barePinned, "-o", stale)
	if _, err := os.Stat(stale + ".provenance.sigstore.json"); err == nil {
		t.Fatal("a stale provenance bundle was left beside the pulled pack")
	}
	noprov.ok("verify", stale)
	if code, _, errs := h.run("pull", barePinned, "-o", filepath.Join(f.dir, "no.pack")); code != exitRefused || !strings.Contains(errs, "requires SLSA provenance") {
		t.Fatalf("pull without provenance under a policy requiring it: exit %d %s", code, errs)
	}

	// cosign reads what was pulled back from the referrers.
	if cosign := os.Getenv("PACKRUN_COSIGN"); cosign != "" {
		cmd := exec.Command(cosign, "verify-blob", "--key", f.key+".pub", "--bundle", out+".sigstore.json", "--insecure-ignore-tlog=true", "--offline", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cosign verify-blob: %v\n%s", err, b)
		}
		cmd = exec.Command(cosign, "tree", "--allow-http-registry", pinned)
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "application/vnd.dev.sigstore.bundle.v0.3+json") {
			t.Fatalf("cosign tree: %v\n%s", err, b)
		}
	}
}

func TestOCIReferrersAPI(t *testing.T) {
	f := newOCIFixture(t)
	proxy := ocitest.NewProxy(t, f.reg.Addr, ocitest.ProxyOptions{ReferrersAPI: true})
	signer := f.home(t, "signer")
	pinned := strings.TrimSpace(signer.ok("push", f.pack, proxy.Addr+"/packs/hello"))
	for _, tag := range f.reg.Tags(t, "packs/hello") {
		if strings.HasPrefix(tag, "sha256-") {
			t.Fatalf("a registry with the referrers API got the fallback tag %s", tag)
		}
	}
	h := f.home(t, "home")
	h.ok("install", "oci://"+pinned)
	h.ok("invoke", "local.hello.c")
	if proxy.ReferrersServed.Load() == 0 {
		t.Fatal("the referrers API was not asked")
	}
}

func TestOCITamperedLayerOnDisk(t *testing.T) {
	f := newOCIFixture(t)
	signer := f.home(t, "signer")
	pinned := strings.TrimSpace(signer.ok("push", f.pack, f.reg.Addr+"/packs/hello"))
	blob := f.reg.BlobPath(f.packDigest)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	h := f.home(t, "home")
	code, _, errs := h.run("install", "oci://"+pinned)
	oneLineErr(t, "tampered layer", code, errs, exitRefused)
	if !strings.Contains(errs, "tampered") {
		t.Fatalf("tampered layer: %s", errs)
	}
	assertNothingStored(t, h)
}

// TestOCIBadRegistryAnswers puts a misbehaving proxy in front of a real
// registry holding a good pack: every bad answer is one line on stderr
// and leaves the home as it was.
func TestOCIBadRegistryAnswers(t *testing.T) {
	f := newOCIFixture(t)
	signer := f.home(t, "signer")
	pinned := strings.TrimSpace(signer.ok("push", f.pack, f.reg.Addr+"/packs/hello"))
	digest := pinned[strings.Index(pinned, "@")+1:]
	isManifest := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/manifests/"+digest)
	}
	isLayer := func(r *http.Request) bool {
		return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+f.packDigest)
	}
	cases := []struct {
		name string
		code int
		fn   func(w http.ResponseWriter, r *http.Request) bool
	}{
		{"garbage manifest", exitRefused, func(w http.ResponseWriter, r *http.Request) bool {
			if !isManifest(r) {
				return false
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Write([]byte("<html>\nnot\na manifest</html>"))
			return true
		}},
		{"manifest over the size limit", exitRefused, func(w http.ResponseWriter, r *http.Request) bool {
			if !isManifest(r) {
				return false
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Write([]byte(`{"schemaVersion":2,"x":"` + strings.Repeat("a", 1<<20) + `"}`))
			return true
		}},
		{"server error with a multi-line body", exitOther, func(w http.ResponseWriter, r *http.Request) bool {
			if !isManifest(r) {
				return false
			}
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte("line one\nline two\n\n<pre>stack</pre>\n"))
			return true
		}},
		{"truncated layer", exitRefused, func(w http.ResponseWriter, r *http.Request) bool {
			if !isLayer(r) {
				return false
			}
			b, _ := os.ReadFile(f.pack)
			w.Header().Set("Content-Length", itoa(len(b)))
			w.Write(b[:len(b)/2])
			return true
		}},
		{"short layer", exitRefused, func(w http.ResponseWriter, r *http.Request) bool {
			if !isLayer(r) {
				return false
			}
			b, _ := os.ReadFile(f.pack)
			w.Write(b[:len(b)/2])
			return true
		}},
		{"redirect loop", exitOther, func(w http.ResponseWriter, r *http.Request) bool {
			if !isLayer(r) {
				return false
			}
			http.Redirect(w, r, r.URL.String(), http.StatusTemporaryRedirect)
			return true
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			proxy := ocitest.NewProxy(t, f.reg.Addr, ocitest.ProxyOptions{Intercept: c.fn})
			h := f.home(t, "home-"+strings.ReplaceAll(c.name, " ", "-"))
			ref := proxy.Addr + "/packs/hello@" + digest
			code, _, errs := h.run("install", "oci://"+ref)
			oneLineErr(t, "install", code, errs, c.code)
			assertNothingStored(t, h)
			out := filepath.Join(f.dir, "bad.pack")
			code, _, errs = h.run("pull", ref, "-o", out)
			oneLineErr(t, "pull", code, errs, c.code)
			if _, err := os.Stat(out); err == nil {
				t.Fatal("pull wrote a file")
			}
		})
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestOCIDockerConfigAuth: a registry that requires a login is reached
// with the credentials of the Docker config file ($DOCKER_CONFIG or
// --docker-config), and refused without them.
func TestOCIDockerConfigAuth(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	f := newOCIFixture(t)
	reg := ocitest.Start(t, ocitest.Options{Htpasswd: "alice:" + string(hash) + "\n"})
	signer := f.home(t, "signer")
	ref := reg.Addr + "/packs/hello"

	t.Setenv("DOCKER_CONFIG", filepath.Join(dir, "none"))
	code, _, errs := signer.run("push", f.pack, ref)
	oneLineErr(t, "push without credentials", code, errs, exitOther)
	if !strings.Contains(errs, "no credentials for this registry") {
		t.Fatalf("push without credentials: %s", errs)
	}

	cfgDir := filepath.Join(dir, "docker")
	os.MkdirAll(cfgDir, 0o700)
	cfg := `{"auths":{"` + reg.Addr + `":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("alice:s3cret")) + `"}}}`
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	pinned := strings.TrimSpace(signer.ok("push", f.pack, ref, "--docker-config", filepath.Join(cfgDir, "config.json")))
	t.Setenv("DOCKER_CONFIG", cfgDir)
	h := f.home(t, "home")
	h.ok("install", "oci://"+pinned)
	h.ok("invoke", "local.hello.c")
}

// TestOCIPackSignedTwice: the same pack pushed with a second signer's
// bundles has two signature referrers; a home that trusts only one of the
// signers installs it with that signer's bundle, whichever came first.
func TestOCIPackSignedTwice(t *testing.T) {
	f := newOCIFixture(t)
	signer := f.home(t, "signer")
	ref := f.reg.Addr + "/packs/hello"
	first := strings.TrimSpace(signer.ok("push", f.pack, ref))

	second := filepath.Join(f.dir, "second", "hello.pack")
	os.MkdirAll(filepath.Dir(second), 0o755)
	b, _ := os.ReadFile(f.pack)
	os.WriteFile(second, b, 0o644)
	key2 := filepath.Join(f.dir, "beta")
	signer.ok("keys", "generate", "--out", key2)
	signer.ok("sign", second, "--key", key2+".key")
	if again := strings.TrimSpace(signer.ok("push", second, ref)); again != first {
		t.Fatalf("the same pack pushed to %s, then %s", first, again)
	}
	for name, key := range map[string]string{"acme": f.key, "beta": key2} {
		h := homeCLI{t, filepath.Join(f.dir, "home-"+name)}
		h.ok("trust", "add-key", name, key+".pub", "--namespace", "local.*")
		if out := h.ok("install", "oci://"+first); !strings.Contains(out, "signed by key:"+name) {
			t.Fatalf("home trusting %s: %s", name, out)
		}
	}
}
