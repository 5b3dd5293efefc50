package packrun

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/registry"
)

// The trust policy's httpHosts limit which hosts a namespace's packs may
// name in grants.http: install refuses a pack asking for another host,
// naming the pack, the namespace and the host, and stores nothing; a pack
// asking only for allowed hosts installs.
func TestInstallRefusesHTTPHostsOutsideNamespace(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	k := newTestKey(t)
	p := trustKey(t, k, "local.*")
	p.HTTPHosts = []registry.HTTPHostRule{{Namespace: "local.*", Hosts: []string{"api.example.com", "*.cdn.example.net"}}}
	savePolicy(t, home, p)
	h := openHost(t, home)
	spec := func(name, host string) packSpec {
		return packSpec{name: name, version: "1.0.0", module: "testdata/modules/extism_fetch.wasm", abiMinor: 3,
			extra: `"grants":{"http":[{"host":"api.example.com"},{"host":"` + host + `"}]},`,
			nodes: `[{"typeId":"fetch","kind":"node","export":"fetch"}]`}
	}
	bad := spec("local.fetch.bad", "evil.example.org")
	_, _, err := h.Install(ctx, k.sign(t, bad.build(t), bad.name), InstallOptions{})
	want := `verify local.fetch.bad: http-hosts: grants.http names host "evil.example.org", outside the http hosts the trust policy allows packs in namespace "local.*"`
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, registry.ErrUntrusted) {
		t.Fatalf("install: %v, want a refusal containing %s", err, want)
	}
	if _, _, err := h.Pack(ctx, bad.name); err == nil {
		t.Fatal("the refused pack was stored")
	}
	good := spec("local.fetch.good", "img.cdn.example.net")
	if _, _, err := h.Install(ctx, k.sign(t, good.build(t), good.name), InstallOptions{}); err != nil {
		t.Fatalf("a pack naming allowed hosts: %v", err)
	}
}
