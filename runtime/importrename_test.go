package runtime

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// imports lists a module's function imports as module.name, as wazero
// reads them.
func imports(t *testing.T, wasm []byte) []string {
	t.Helper()
	r := wazero.NewRuntime(context.Background())
	defer r.Close(context.Background())
	cm, err := r.CompileModule(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		out = append(out, mod+"."+name)
	}
	return out
}

// Only Extism's http imports move to packrun's namespace; every other
// import, and every other byte, stays; a module without them is returned
// as is.
func TestRenameImports(t *testing.T) {
	for _, path := range []string{"testdata/modules/extism_fetch.wasm", "testdata/extism-fetch/fetch.wasm"} {
		wasm := fixture(t, path)
		out, err := renameImports(wasm, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		before, after := imports(t, wasm), imports(t, out)
		if len(before) != len(after) {
			t.Fatalf("%s: %d imports became %d", path, len(before), len(after))
		}
		moved := 0
		for i, b := range before {
			mod, name, _ := strings.Cut(b, ".")
			want := b
			if mod == ModuleExtism && extismHTTPImports[name] {
				want, moved = moduleExtismHTTP+"."+name, moved+1
			}
			if after[i] != want {
				t.Errorf("%s: import %d is %s, want %s", path, i, after[i], want)
			}
		}
		if moved == 0 {
			t.Errorf("%s: no Extism http import moved", path)
		}
		again, err := renameImports(out, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
		if err != nil || &again[0] != &out[0] {
			t.Errorf("%s: a module without Extism http imports was not returned as is (%v)", path, err)
		}
	}
	hello := fixture(t, "examples/hello-wat/hello.wasm")
	if out, err := renameImports(hello, ModuleExtism, moduleExtismHTTP, extismHTTPImports); err != nil || !bytes.Equal(out, hello) {
		t.Errorf("hello: %v", err)
	}
}

// Malformed modules are refused with an error naming the section and what
// in it is wrong; nothing is read out of bounds.
func TestRenameImportsRefusesMalformed(t *testing.T) {
	head := "\x00asm\x01\x00\x00\x00"
	imp := func(body string) []byte { return []byte(head + "\x02" + string(rune(len(body))) + body) }
	for _, tc := range []struct {
		name string
		wasm []byte
		want string
	}{
		{"no header", []byte("\x00as"), "not a WebAssembly module"},
		{"section past the end", []byte(head + "\x02\x10\x01"), "section 2 at byte 8 declares 16 bytes; only 1 remain"},
		{"section size overflows 32 bits", []byte(head + "\x02\xff\xff\xff\xff\x7f"), "section 2 at byte 8: size: LEB128 overflows 32 bits"},
		{"section size too long", []byte(head + "\x02\x80\x80"), "unexpected end in a LEB128"},
		{"module name past the end", imp("\x01\x09ab"), "import section at byte 8: import 0 module name: declares 9 bytes; only 2 remain"},
		{"missing field name", imp("\x01\x01a"), "import 0 field name length: unexpected end in a LEB128"},
		{"unknown kind", imp("\x01\x01a\x01b\x07"), "import 0 has unknown kind 0x07"},
		{"missing kind", imp("\x01\x01a\x01b"), "import 0 kind: unexpected end of section"},
		{"bad limits flags", imp("\x01\x01a\x01b\x02\x09\x01"), "import 0 has unknown limits flags 0x09"},
		{"memory64 limit too long", imp("\x01\x01a\x01b\x02\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"), "import 0 limit: LEB128 longer than 10 bytes"},
		{"fewer imports than declared", imp("\x02\x01a\x01b\x00\x00"), "import 1 module name length: unexpected end in a LEB128"},
		{"bytes after the imports", imp("\x01\x01a\x01b\x00\x00\x00"), "1 bytes after the last of 1 imports"},
	} {
		_, err := renameImports(tc.wasm, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// FuzzRenameImports: the rewriter never panics or reads out of bounds;
// what it returns has no import left to move (renaming again returns it
// unchanged) and, when the input's import section was well-formed, keeps
// every section after it byte for byte.
func FuzzRenameImports(f *testing.F) {
	f.Add(fixture(f, "testdata/modules/extism_fetch.wasm"))
	f.Add(fixture(f, "examples/hello-wat/hello.wasm"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x1d\x01\x0fextism:host/env\x0chttp_request\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x0a\x01\x01a\x01b\x02\x05\x01\x02"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, err := renameImports(wasm, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
		if err != nil {
			return
		}
		again, err := renameImports(out, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("renaming the output again: %v, changed %v", err, !bytes.Equal(again, out))
		}
	})
}

// An Extism plugin declaring one of Extism's http functions with another
// signature is refused at load, naming the import and both signatures.
func TestExtismHTTPImportSignature(t *testing.T) {
	r := newTestRuntime(t, NewConfig().WithPoolSize(0))
	mod := "extism:host/env"
	field := "http_request"
	imports := append([]byte{1, byte(len(mod))}, mod...)
	imports = append(append(append(imports, byte(len(field))), field...), 0x00, 0x00)
	wasm := append([]byte("\x00asm\x01\x00\x00\x00\x01\x06\x01\x60\x01\x7f\x01\x7f\x02"), byte(len(imports)))
	wasm = append(wasm, imports...)
	_, err := r.Load(context.Background(), wasm, LoadOptions{Name: "bad-http"})
	le, ok := errors.AsType[*LoadError](err)
	if want := "extism:host/env.http_request is declared (i32) -> (i32); Extism declares it (i64 i64) -> (i64)"; !ok || le.Code != CodeBadSignature || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %s refusing %s", err, CodeBadSignature, want)
	}
}
