package packs

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// owPJ is an openwop pack.json (the published rust-hello's shape) with
// runtime.entry naming module.wasm.
const owPJ = `{"name":"vendor.openwop.rust_hello","version":"1.0.0","description":"d","author":"a",
"engines":{"openwop":">=1.1 <2.0.0"},
"nodes":[{"typeId":"vendor.openwop.rust-hello.greet","version":"1.0.0","category":"data","role":"pure","label":"Greet"}],
"runtime":{"language":"wasm","entry":"module.wasm","format":"wasm","minRuntimeVersion":"1",
  "wasm":{"abiVersion":1,"memoryPagesInitial":16,"memoryPagesMax":1024}}}`

// owArchive is a tarball with "./" entries: the "./" directory, pack.json,
// module.wasm and a README.
func owArchive(t testing.TB, pj string) []byte {
	dir := entry{hdr: tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}}
	return craft(t, dir, reg("./pack.json", []byte(pj)), reg("./module.wasm", wasmStub), reg("./README.md", []byte("hi")))
}

// TestReadOpenwopArchive: an openwop tarball ("./" entries, README.md
// beside the module) reads; pack.json is translated: module pinned by its
// digest, ABI from runtime.wasm, memory from memoryPagesMax, nodes are
// workflow nodes, openwop's fields kept in Manifest.Openwop, and
// ManifestBytes is the translation, which DecodeStoredManifest reads back.
func TestReadOpenwopArchive(t *testing.T) {
	a, err := Read(bytes.NewReader(owArchive(t, owPJ)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m := a.Manifest
	if m.Name != "vendor.openwop.rust_hello" || m.Runtime.Modules[0] != (Module{Path: "module.wasm", SHA256: sha(wasmStub)}) {
		t.Fatalf("manifest %+v", m)
	}
	if m.ABI().Major != 1 || m.Runtime.Limits.MemoryPages != 1024 || m.Nodes[0].Kind != KindNode {
		t.Fatalf("runtime %+v nodes %+v", m.Runtime, m.Nodes)
	}
	ow := m.Openwop
	if ow.Format != "openwop-v1" || ow.Engines != ">=1.1 <2.0.0" || ow.EntryNote != "" || ow.Nodes[0].Role != "pure" {
		t.Fatalf("openwop %+v", ow)
	}
	if raw, _ := a.File(ManifestName); string(raw) != owPJ {
		t.Fatal("pack.json as written is not kept")
	}
	back, err := DecodeStoredManifest(a.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(back); !bytes.Equal(b, a.ManifestBytes) {
		t.Fatalf("the recorded translation does not read back:\n%s\n%s", b, a.ManifestBytes)
	}
	// "./pack.json" and "pack.json" are one path.
	dup := craft(t, reg("./pack.json", []byte(owPJ)), reg("pack.json", []byte(owPJ)), reg("module.wasm", wasmStub))
	if _, err := Read(bytes.NewReader(dup), Limits{}); err == nil || !strings.Contains(err.Error(), "duplicate entry") {
		t.Fatalf("duplicate through ./: %v", err)
	}
	// The translation is repeated when the installed pack is read again.
	if _, err := ReadInstalled(bytes.NewReader(owArchive(t, owPJ)), Limits{}, a.SHA256, back); err != nil {
		t.Fatal(err)
	}
}

// TestTranslateOpenwopRefusals: each thing packrun cannot honour or does
// not understand is one problem at its JSON path; extension keys are not.
func TestTranslateOpenwopRefusals(t *testing.T) {
	files := func(p string) ([]byte, bool) { return wasmStub, p == "module.wasm" || p == "dist/mod.wasm" }
	for _, c := range []struct{ from, to, path, want string }{
		{`"author":"a"`, `"author":"a","main":"x"`, `$.main`, "unknown field"},
		{`"author":"a"`, `"author":"a","x-main":"x","vendor.acme":1,"openwop-y":{}`, ``, ""},
		{`"author":"a"`, `"kind":"workflow-chain"`, `$.kind`, "only node packs"},
		{`"author":"a"`, `"kind":"node"`, ``, ""},
		{`>=1.1 <2.0.0`, `>=3.0.0 <4.0.0`, `$.engines.openwop`, "pack_engine_unsupported"},
		{`>=1.1 <2.0.0`, `>=2.0.0 <3.0.0`, ``, ""},
		{`>=1.1 <2.0.0`, `latest`, `$.engines.openwop`, "pack_engine_unsupported"},
		{`"engines":{"openwop":">=1.1 <2.0.0"},`, ``, `$.engines`, "required"},
		{`"language":"wasm"`, `"language":"javascript"`, `$.runtime.language`, "wasm"},
		{`"format":"wasm"`, `"format":"esm"`, `$.runtime.format`, "core WebAssembly"},
		{`"format":"wasm"`, `"format":"wasm","requires":["net.dns"]`, `$.runtime.requires`, "pack_runtime_requirement_unmet"},
		{`"format":"wasm"`, `"format":"wasm","requires":[]`, ``, ""},
		{`"label":"Greet"`, `"requiresSecrets":[{"id":"k","kind":"api-key"}]`, `$.nodes[0].requiresSecrets`, "credential_unavailable"},
		{`"label":"Greet"`, `"kind":"skill"`, `$.nodes[0].kind`, "workflow nodes"},
		{`"label":"Greet"`, `"kind":"node"`, ``, ""},
		{`"author":"a"`, `"dependencies":{"vendor.x.y":"^1"}`, `$.dependencies`, "not resolved"},
		{`"author":"a"`, `"peerDependencies":{"aiProviders":"required"}`, `$.peerDependencies`, "pack_peer_dependency_missing"},
		{`vendor.openwop.rust_hello"`, `local.openwop.x"`, `$.name`, "openwop pack name"},
		{`vendor.openwop.rust_hello"`, `core.openwop.fooBar"`, ``, ""},
		{`vendor.openwop.rust_hello"`, `private.host_1.x-y"`, ``, ""},
		{`vendor.openwop.rust_hello"`, `vendor.Openwop.x"`, `$.name`, "openwop pack name"},
		{`"entry":"module.wasm"`, `"entry":"target/release/nothing.wasm"`, `$.runtime.entry`, "not in the archive"},
		{`"entry":"module.wasm"`, `"entry":"build/out/mod.wasm"`, ``, ""},
		{`"entry":"module.wasm"`, `"entry":"../module.wasm"`, `$.runtime.entry`, ""},
		{`"abiVersion":1`, `"abiVersion":"1"`, `$.runtime.wasm.abiVersion`, "integer"},
		{`"memoryPagesMax":1024`, `"memoryPagesMax":70000`, `$.runtime.wasm.memoryPagesMax`, "between"},
		{`"author":"a"`, `"signing":{"keyId":"k","scheme":"rsa"}`, `$.signing`, "ed25519-canonical-json"},
		{`"author":"a",`, `"author":"a","author":"b",`, `$.author`, "duplicate key"},
	} {
		pj := strings.Replace(owPJ, c.from, c.to, 1)
		if pj == owPJ {
			t.Fatalf("%s: not in the manifest", c.from)
		}
		m, err := TranslateOpenwop([]byte(pj), files)
		if c.path == "" {
			if err != nil {
				t.Errorf("%s: %v", c.to, err)
			}
			if c.to == `"entry":"build/out/mod.wasm"` && (m == nil || m.Openwop.Module != "dist/mod.wasm" || m.Openwop.EntryNote == "") {
				t.Errorf("%s: not resolved under dist/: %+v", c.to, m)
			}
			continue
		}
		var v *ValidationError
		if !errors.As(err, &v) || v.Problems[0].Path != c.path || !strings.Contains(v.Problems[0].Message, c.want) {
			t.Errorf("%s: %v, want %s: ...%s", c.to, err, c.path, c.want)
		}
	}
}

// TestAdmitsMajor: openwop engine ranges against the protocol majors.
func TestAdmitsMajor(t *testing.T) {
	for r, ok := range map[string]bool{
		">=1.1 <2.0.0": true, ">=2.0.0 <3.0.0": true, ">=1.0": true, ">=2.0.0": false, "^1.2.3": true, "^2": true,
		"~1.4": true, "1.2.3": true, "3": false, ">=3.0.0 <4.0.0": false, "<1.0.0": false, ">0.9 <=1.0.0": true,
		"^0.4": false, ">=3 <4 || >=1 <2": true, "": false, ">=x": false, ">=1.2.3-beta <2": false, "!1": false,
	} {
		if got := admitsMajor(r, openwopMajors) == ""; got != ok {
			t.Errorf("%q admits 1 or 2: %v, want %v", r, got, ok)
		}
	}
}

func FuzzTranslateOpenwop(f *testing.F) {
	f.Add([]byte(owPJ))
	f.Add([]byte(`{"engines":{}}`))
	f.Add([]byte(`{"engines":{"openwop":"^1 || >=2.0 <3.0.0"},"runtime":{"entry":"./a"}}`))
	f.Add([]byte(strings.Replace(owPJ, `"author":"a"`, `"signing":{"keyId":"k","scheme":"ed25519-canonical-json"}`, 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := TranslateOpenwop(b, func(p string) ([]byte, bool) { return wasmStub, p == "module.wasm" })
		if err != nil {
			var v *ValidationError
			if !errors.As(err, &v) || len(v.Problems) == 0 {
				t.Fatalf("err = %#v", err)
			}
			checkOneLine(t, err)
			return
		}
		if m.Openwop == nil || len(m.Runtime.Modules) != 1 || m.Validate() != nil {
			t.Fatalf("accepted a manifest that is not whole: %+v", m)
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}
