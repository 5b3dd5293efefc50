// Package ocitest starts a real OCI registry for tests: Debian's
// docker-registry package (CNCF distribution 2.8, which has no referrers
// API) on a free loopback port with its storage in a temporary directory,
// stopped when the test ends. It also offers a proxy in front of it that
// can answer the referrers API or misbehave (serve tampered, truncated or
// garbage answers), so a client's handling of both is tested against the
// same real storage. A missing binary fails the test, naming the package
// to install; it never skips.
//
// Environment: DOCKER_REGISTRY names the binary (default
// /usr/bin/docker-registry).
package ocitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Registry is a running docker-registry.
type Registry struct {
	// Addr is host:port on 127.0.0.1.
	Addr string
	// Dir is the storage root directory.
	Dir string
}

// Options adjust Start.
type Options struct {
	// Htpasswd, when set, is the content of an htpasswd file (bcrypt
	// entries): the registry then requires basic authentication.
	Htpasswd string
}

// Start runs a registry until the test ends.
func Start(t testing.TB, o Options) *Registry {
	t.Helper()
	bin := os.Getenv("DOCKER_REGISTRY")
	if bin == "" {
		bin = "/usr/bin/docker-registry"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("ocitest: %s: %v (apt-get install docker-registry)", bin, err)
	}
	dir := t.TempDir()
	port := freePort(t)
	r := &Registry{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: filepath.Join(dir, "storage")}
	auth := ""
	if o.Htpasswd != "" {
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(o.Htpasswd), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth:\n  htpasswd:\n    realm: ocitest\n    path: %s\n", pw)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
%s`, r.Dir, r.Addr, auth)
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuffer
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("ocitest: start %s: %v", bin, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done //nolint:errcheck // killed: its exit status says nothing
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + r.Addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return r
			}
		}
		select {
		case err := <-done:
			t.Fatalf("ocitest: docker-registry exited: %v\n%s", err, logBuf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ocitest: docker-registry did not answer on %s\n%s", r.Addr, logBuf.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BlobPath is the file holding the blob with the given digest
// ("sha256:<hex>") in the registry's storage.
func (r *Registry) BlobPath(digest string) string {
	hex := strings.TrimPrefix(digest, "sha256:")
	return filepath.Join(r.Dir, "docker", "registry", "v2", "blobs", "sha256", hex[:2], hex, "data")
}

// Tags lists the tags of repo, straight from the registry.
func (r *Registry) Tags(t testing.TB, repo string) []string {
	t.Helper()
	resp, err := http.Get("http://" + r.Addr + "/v2/" + repo + "/tags/list")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Tags []string }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("tags of %s: %v", repo, err)
	}
	return v.Tags
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Proxy is an HTTP server on loopback in front of a registry.
type Proxy struct {
	// Addr is host:port of the proxy.
	Addr string
	// ReferrersServed counts the referrers API answers the proxy gave.
	ReferrersServed atomic.Int64

	referrersAPI bool
	mu           sync.Mutex
	referrers    map[string][]map[string]any // subject digest → descriptors
}

// ProxyOptions choose what the proxy does besides forwarding.
type ProxyOptions struct {
	// ReferrersAPI: answer GET /v2/NAME/referrers/DIGEST from the
	// referrer manifests pushed through the proxy, and answer their
	// pushes with OCI-Subject (as a registry with the API does).
	ReferrersAPI bool
	// Intercept, when set, may answer a request itself (returning true)
	// instead of forwarding it.
	Intercept func(w http.ResponseWriter, r *http.Request) bool
}

// NewProxy starts a proxy to upstream (host:port) until the test ends.
func NewProxy(t testing.TB, upstream string, o ProxyOptions) *Proxy {
	t.Helper()
	p := &Proxy{referrersAPI: o.ReferrersAPI, referrers: map[string][]map[string]any{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
	rp.ErrorLog = nil
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Intercept != nil && o.Intercept(w, r) {
			return
		}
		if p.referrersAPI && p.serveReferrers(w, r, rp) {
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p.Addr = strings.TrimPrefix(srv.URL, "http://")
	return p
}

// serveReferrers answers the referrers API and records referrer pushes.
func (p *Proxy) serveReferrers(w http.ResponseWriter, r *http.Request, rp *httputil.ReverseProxy) bool {
	path := r.URL.Path
	if i := strings.Index(path, "/referrers/"); r.Method == http.MethodGet && strings.HasPrefix(path, "/v2/") && i > 0 {
		subject := path[i+len("/referrers/"):]
		p.mu.Lock()
		ms := append([]map[string]any{}, p.referrers[subject]...)
		p.mu.Unlock()
		if at := r.URL.Query().Get("artifactType"); at != "" {
			var kept []map[string]any
			for _, m := range ms {
				if m["artifactType"] == at {
					kept = append(kept, m)
				}
			}
			ms = kept
			w.Header().Set("OCI-Filters-Applied", "artifactType")
		}
		if ms == nil {
			ms = []map[string]any{}
		}
		w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
		_ = json.NewEncoder(w).Encode(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": ms})
		p.ReferrersServed.Add(1)
		return true
	}
	if r.Method != http.MethodPut || !strings.Contains(path, "/manifests/") {
		return false
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		MediaType    string            `json:"mediaType"`
		ArtifactType string            `json:"artifactType"`
		Annotations  map[string]string `json:"annotations"`
		Subject      *struct {
			Digest string `json:"digest"`
		} `json:"subject"`
	}
	if json.Unmarshal(body, &m) != nil || m.Subject == nil {
		return false
	}
	rec := httptest.NewRecorder()
	rp.ServeHTTP(rec, r)
	if rec.Code == http.StatusCreated {
		d := map[string]any{"mediaType": m.MediaType, "digest": rec.Header().Get("Docker-Content-Digest"), "size": len(body), "artifactType": m.ArtifactType}
		if m.Annotations != nil {
			d["annotations"] = m.Annotations
		}
		p.mu.Lock()
		p.referrers[m.Subject.Digest] = append(p.referrers[m.Subject.Digest], d)
		p.mu.Unlock()
		rec.Header().Set("OCI-Subject", m.Subject.Digest)
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	return true
}
