package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// The registry read API serves the installed packs with an openwop name
// and a SemVer version, each file as it was stored; every answer is
// checked against the OpenAPI document (newEnv).
func TestOpenwopRegistryRead(t *testing.T) {
	b := newBackend(t)
	ctx := context.Background()
	install := func(name, version string, blobs host.PackBlobs) *host.InstalledPack {
		t.Helper()
		p, _, err := b.InstallPack(ctx, &host.InstalledPack{Name: name, Version: version, Signer: "registry-key:k1",
			Manifest: json.RawMessage(`{"name":"` + name + `","version":"` + version + `","description":"d ` + version + `"}`)}, blobs)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	old := install("vendor.acme.tools", "1.0.0", host.PackBlobs{Archive: []byte("archive 1.0.0"), Signature: []byte("sig 1.0.0")})
	install("vendor.acme.tools", "1.1.0", host.PackBlobs{Archive: []byte("archive 1.1.0")})
	install("local.mine", "1.0.0", host.PackBlobs{Archive: []byte("local")}) // not an openwop name: not in the catalog
	e := newEnv(t, b, nil)

	var s registrySearch
	if err := json.Unmarshal(e.get("/v1/packs/-/search?q=").body, &s); err != nil || s.Total != 1 || len(s.Results) != 1 ||
		s.Results[0] != (registryResult{Name: "vendor.acme.tools", Version: "1.1.0", Description: "d 1.1.0"}) {
		t.Fatalf("search: %+v %v", s, err)
	}
	if r := e.get("/v1/packs/-/search?q=nothing"); string(r.body) != "{\"results\":[],\"total\":0}\n" {
		t.Fatalf("search for nothing: %s", r.body)
	}
	r := e.get("/v1/packs/vendor.acme.tools")
	wantStatus(t, r, http.StatusOK)
	cat := decode[registryCatalog](t, r)
	v := cat.Versions["1.0.0"]
	sum := sha256.Sum256([]byte("archive 1.0.0"))
	if cat.Name != "vendor.acme.tools" || cat.DistTags["latest"] != "1.1.0" || len(cat.Versions) != 2 ||
		v.Dist.Shasum != hex.EncodeToString(sum[:]) || v.Dist.Shasum != old.SHA256 || v.Dist.Size != int64(len("archive 1.0.0")) ||
		v.Dist.Signature != "/v1/packs/vendor.acme.tools/-/1.0.0.sig" || cat.Versions["1.1.0"].Dist.Signature != "" || v.Signer != "registry-key:k1" {
		t.Fatalf("catalog: %s", r.body)
	}
	for path, want := range map[string]string{
		"/v1/packs/vendor.acme.tools/-/1.0.0.tgz":  "archive 1.0.0",
		"/v1/packs/vendor.acme.tools/-/1.0.0.sig":  "sig 1.0.0",
		"/v1/packs/vendor.acme.tools/-/1.1.0.json": `{"name":"vendor.acme.tools","version":"1.1.0","description":"d 1.1.0"}`,
	} {
		// The .tgz and .sig are octets, not JSON (e.get checks JSON).
		res, err := e.client.Get(e.url + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := resp{res.StatusCode, res.Header, body}
		if ct := r.header.Get("Content-Type"); ct != "application/octet-stream" && ct != "application/json" {
			t.Errorf("%s: Content-Type %q", path, ct)
		}
		if r.status != http.StatusOK || string(r.body) != want {
			t.Errorf("%s: %d %q, want %q", path, r.status, r.body, want)
		}
		if strings.HasSuffix(path, ".tgz") && r.header.Get("X-Pack-Sha256") != old.SHA256 {
			t.Errorf("%s: X-Pack-Sha256 %q", path, r.header.Get("X-Pack-Sha256"))
		}
	}
	for path, code := range map[string]string{
		"/v1/packs/vendor.acme.tools/-/1.1.0.sig": owCodeSigNotAvailable, // installed without a detached signature
		"/v1/packs/vendor.acme.tools/-/2.0.0.tgz": owCodePackNotFound,
		"/v1/packs/local.mine/-/1.0.0.tgz":        owCodeInvalidPackName,
	} {
		r := e.get(path)
		var env openwopErrorBody
		if r.status/100 != 4 || json.Unmarshal(r.body, &env) != nil || env.Error != code {
			t.Errorf("%s: %d %s, want %s", path, r.status, r.body, code)
		}
	}
}
