package packs

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"name":"local.x","name":1}`))
	f.Add([]byte(`{"nodes":[{"inputSchema":{"$ref":"#"}}]}`))
	f.Add([]byte(`{"runtime":{"limits":{"memoryPages":1e400}}}`))
	f.Add([]byte(`{"nodes":[{"typeId":"a","kind":"node","subscribes":["crisis.*","*",""]}],"grants":{"services":["messages"],"topics":["crisis.*","a..b"]}}`))
	examples, _ := filepath.Glob("../examples/*/pack.json")
	for _, p := range examples {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeManifest(b)
		if err != nil {
			var v *ValidationError
			if !errors.As(err, &v) || len(v.Problems) == 0 {
				t.Fatalf("err = %#v", err)
			}
			for _, p := range v.Problems {
				if !strings.HasPrefix(p.Path, "$") || p.Message == "" {
					t.Fatalf("problem %q", p)
				}
			}
			checkOneLine(t, err)
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded manifest does not validate: %v", err)
		}
		enc, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := DecodeManifest(enc); err != nil {
			t.Fatalf("re-encoded manifest refused: %v\n%s", err, enc)
		}
	})
}

func FuzzRead(f *testing.F) {
	good, err := Pack(validDir(f))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	ok := validEntries(f)
	f.Add(craft(f, ok...))
	f.Add(craft(f, append(ok, entry{tar.Header{Name: "assets/l", Typeflag: tar.TypeSymlink, Linkname: "../../etc/passwd"}, nil})...))
	f.Add(craft(f, append(ok, reg("../x", []byte("x")))...))
	f.Add(craft(f, append(ok, reg("m.wasm", wasmStub))...))
	f.Add(craft(f, reg("pack.json", []byte(valid))))
	f.Add(owArchive(f, owPJ))
	f.Add(craft(f, reg("./pack.json", []byte(owPJ)), reg("pack.json", []byte(owPJ))))
	lim := Limits{ArchiveBytes: 1 << 20, TotalBytes: 4 << 20, EntryBytes: 1 << 20, Entries: 64}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Read(bytes.NewReader(b), lim)
		if err != nil {
			if !errors.Is(err, ErrInvalidPack) {
				t.Fatalf("err = %v, not ErrInvalidPack", err)
			}
			checkOneLine(t, err)
			return
		}
		var total int64
		for _, f := range a.Files {
			total += int64(len(f.Data))
			if int64(len(f.Data)) > lim.EntryBytes {
				t.Fatalf("%s: %d bytes", f.Path, len(f.Data))
			}
		}
		if total > lim.TotalBytes || len(a.Files) > lim.Entries || a.Size != int64(len(b)) || a.SHA256 != sha(b) || a.Manifest == nil {
			t.Fatalf("archive %d files, %d bytes, size %d", len(a.Files), total, a.Size)
		}
		// What Read accepts, Pack's writer reproduces and Read accepts again.
		var buf bytes.Buffer
		if _, err := (&Source{Manifest: a.Manifest, Files: a.Files}).WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		b2, err := Read(&buf, Limits{})
		if err != nil {
			t.Fatalf("rewritten archive refused: %v", err)
		}
		if b2.SourceDigest() != a.SourceDigest() {
			t.Fatal("source digest changed")
		}
	})
}

// checkOneLine fails unless err reads as one line of less than 4 KiB.
func checkOneLine(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); len(msg) >= 4<<10 || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error is not one short line (%d bytes): %.300q", len(msg), msg)
	}
}
