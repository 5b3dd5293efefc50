package packs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	dir := validDir(t)
	src, err := Collect(dir)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles := []string{"assets/a.txt", "assets/d/b.json", "m.wasm", "pack.json"}
	if got := paths(src.Files); !slices.Equal(got, wantFiles) {
		t.Errorf("collected %q, want %q", got, wantFiles)
	}
	if want := []string{"README.md", "src/"}; !slices.Equal(src.Skipped, want) {
		t.Errorf("skipped %q, want %q", src.Skipped, want)
	}
	b, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Read(bytes.NewReader(b), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(a.Files); !slices.Equal(got, wantFiles) {
		t.Errorf("read %q, want %q", got, wantFiles)
	}
	for _, f := range src.Files {
		if got, ok := a.File(f.Path); !ok || !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs", f.Path)
		}
	}
	if a.Size != int64(len(b)) || a.SHA256 != sha(b) {
		t.Errorf("size %d sha %s, want %d %s", a.Size, a.SHA256, len(b), sha(b))
	}
	mb, _ := os.ReadFile(filepath.Join(dir, "pack.json"))
	if !bytes.Equal(a.ManifestBytes, mb) || a.Manifest.Name != "local.test" {
		t.Error("manifest not kept verbatim")
	}
	sd, err := SourceDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sd != a.SourceDigest() || sd != src.Digest() || len(sd) != 64 {
		t.Errorf("source digests %s %s %s", sd, a.SourceDigest(), src.Digest())
	}
	if _, ok := a.File("README.md"); ok {
		t.Error("README.md packed")
	}

	// The entries are what the format promises.
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() || zr.OS != 255 {
		t.Errorf("gzip header %+v", zr.Header)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" ||
			h.ModTime.Unix() != 0 || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || len(h.PAXRecords) != 0 || h.Format != tar.FormatUSTAR {
			t.Errorf("header %+v", h)
		}
	}
}

func TestDeterministic(t *testing.T) {
	dir := validDir(t)
	first, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Fatal("packing twice gave different bytes")
	}
	// Times, modes and the directory's own path do not matter.
	other := t.TempDir()
	if err := os.CopyFS(other, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 7, time.UTC)
	filepath.WalkDir(other, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			os.Chtimes(p, when, when)
			if !d.IsDir() {
				os.Chmod(p, 0o600)
			}
		}
		return nil
	})
	moved, err := Pack(other)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, moved) {
		t.Fatal("touching mtimes and modes changed the archive")
	}
	// A non-ASCII asset name needs a PAX header; that is deterministic too.
	os.WriteFile(filepath.Join(dir, "assets", "ünïcødé.txt"), []byte("x"), 0o644)
	u1, err := Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	os.Chtimes(filepath.Join(dir, "assets", "ünïcødé.txt"), when, when)
	u2, _ := Pack(dir)
	if !bytes.Equal(u1, u2) {
		t.Fatal("PAX entry not deterministic")
	}
	if _, err := Read(bytes.NewReader(u1), Limits{}); err != nil {
		t.Fatal(err)
	}
}

func TestPackRefuses(t *testing.T) {
	good := map[string][]byte{"pack.json": manifestJSON(t, map[string][]byte{"m.wasm": wasmStub}), "m.wasm": wasmStub}
	with := func(extra map[string][]byte) map[string][]byte {
		m := map[string][]byte{}
		for k, v := range good {
			m[k] = v
		}
		for k, v := range extra {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		files map[string][]byte
		setup func(t *testing.T, dir string)
		entry string // FormatError.Entry
		want  string
	}{
		{name: "no manifest", files: with(map[string][]byte{"pack.json": nil}), entry: "pack.json", want: "not found"},
		{name: "invalid manifest", files: with(map[string][]byte{"pack.json": []byte(`{"name":"x"}`)}), entry: "pack.json", want: "$.name"},
		{name: "module missing", files: with(map[string][]byte{"m.wasm": nil}), entry: "m.wasm", want: "not found"},
		{name: "module with wrong sha256", files: with(map[string][]byte{"m.wasm": []byte("\x00asm tampered")}), entry: "m.wasm", want: "sha256 is"},
		{name: "module is a symlink", files: with(map[string][]byte{"m.wasm": nil, "real.wasm": wasmStub}),
			setup: func(t *testing.T, dir string) { symlink(t, "real.wasm", filepath.Join(dir, "m.wasm")) }, entry: "m.wasm", want: "symbolic link"},
		{name: "module is a directory", files: with(map[string][]byte{"m.wasm": nil, "m.wasm/x": []byte("x")}), entry: "m.wasm", want: "not a regular file"},
		{name: "manifest is a symlink", files: with(map[string][]byte{"pack.json": nil, "real.json": good["pack.json"]}),
			setup: func(t *testing.T, dir string) { symlink(t, "real.json", filepath.Join(dir, "pack.json")) }, entry: "pack.json", want: "symbolic link"},
		{name: "symlink in assets", files: with(map[string][]byte{"assets/a": []byte("a")}),
			setup: func(t *testing.T, dir string) { symlink(t, "/etc/passwd", filepath.Join(dir, "assets", "passwd")) }, entry: "assets/passwd", want: "symbolic link"},
		{name: "assets is a symlink", files: with(map[string][]byte{"elsewhere/a": []byte("a")}),
			setup: func(t *testing.T, dir string) { symlink(t, "elsewhere", filepath.Join(dir, "assets")) }, entry: "assets", want: "symbolic link"},
		{name: "assets is a file", files: with(map[string][]byte{"assets": []byte("a")}), entry: "assets", want: "not a directory"},
		{name: "asset with a backslash", files: with(map[string][]byte{`assets/a\b`: []byte("a")}), entry: `assets/a\b`, want: "backslash"},
		{name: "assets differing in case", files: with(map[string][]byte{"assets/A": []byte("a"), "assets/a": []byte("a")}), entry: "assets/a", want: "case"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeDir(t, tc.files)
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			_, err := Pack(dir)
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidPack) {
				t.Fatalf("err = %v, want *FormatError", err)
			}
			if fe.Entry != tc.entry || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q (entry %q), want entry %q and %q", err, fe.Entry, tc.entry, tc.want)
			}
		})
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks: %v", err)
	}
}

func TestReadRefuses(t *testing.T) {
	manifest := manifestJSON(t, map[string][]byte{"m.wasm": wasmStub})
	ok := validEntries(t)
	plus := func(es ...entry) []byte { return craft(t, append(slices.Clone(ok), es...)...) }
	special := func(name string, typ byte, link string) entry {
		return entry{tar.Header{Name: name, Typeflag: typ, Linkname: link, Mode: 0o644}, nil}
	}
	valid := craft(t, ok...)
	flip := func(i int) []byte { b := slices.Clone(valid); b[i] ^= 0x55; return b }
	for _, tc := range []struct {
		name  string
		data  []byte
		lim   Limits
		entry string
		want  string
		large bool // errors.Is(err, ErrTooLarge)
	}{
		{name: "empty input", data: nil, want: "not gzip"},
		{name: "not gzip", data: []byte("PK\x03\x04 a zip file"), want: "not gzip"},
		{name: "gzip of garbage", data: gz(t, []byte(strings.Repeat("garbage ", 200))), want: "corrupt"},
		{name: "truncated", data: valid[:len(valid)/2], want: "corrupt"},
		{name: "tampered byte in the middle", data: flip(len(valid) / 2), want: "corrupt"},
		{name: "tampered byte early", data: flip(len(valid) / 3), want: "corrupt"},
		{name: "tampered byte late", data: flip(2 * len(valid) / 3), want: "corrupt"},
		{name: "tampered crc32", data: flip(len(valid) - 8), want: "checksum"},
		{name: "tampered size", data: flip(len(valid) - 1), want: "corrupt"},
		{name: "data after gzip", data: append(slices.Clone(valid), "trailing"...), want: "after the gzip stream"},
		{name: "second gzip member", data: append(slices.Clone(valid), valid...), want: "after the gzip stream"},
		{name: "data after tar end", data: gz(t, append(tarBytes(t, ok...), "hidden"...)), want: "after the end of the tar archive"},
		{name: "parent traversal", data: plus(reg("../x", []byte("x"))), entry: "../x", want: `".."`},
		{name: "absolute path", data: plus(reg("/etc/passwd", []byte("x"))), entry: "/etc/passwd", want: "absolute"},
		{name: "traversal in the middle", data: plus(reg("a/../../b", []byte("x"))), entry: "a/../../b", want: `".."`},
		{name: "not clean", data: plus(reg("assets/./a", []byte("x"))), entry: "assets/./a", want: "not clean"},
		{name: "double slash", data: plus(reg("assets//a", []byte("x"))), entry: "assets//a", want: "not clean"},
		{name: "backslash", data: plus(reg(`assets\..\x`, []byte("x"))), entry: `assets\..\x`, want: "backslash"},
		{name: "empty name", data: plus(reg("", []byte("x"))), want: "empty path"},
		{name: "control character", data: plus(reg("assets/a\nb", []byte("x"))), entry: "assets/a\nb", want: "control"},
		{name: "symlink", data: plus(special("assets/link", tar.TypeSymlink, "/etc/passwd")), entry: "assets/link", want: "symbolic link"},
		{name: "hardlink", data: plus(special("assets/link", tar.TypeLink, "m.wasm")), entry: "assets/link", want: "hard link"},
		{name: "character device", data: plus(special("assets/null", tar.TypeChar, "")), entry: "assets/null", want: "character device"},
		{name: "block device", data: plus(special("assets/sda", tar.TypeBlock, "")), entry: "assets/sda", want: "block device"},
		{name: "fifo", data: plus(special("assets/fifo", tar.TypeFifo, "")), entry: "assets/fifo", want: "named pipe"},
		{name: "duplicate entry", data: plus(reg("m.wasm", wasmStub)), entry: "m.wasm", want: "duplicate"},
		{name: "duplicate manifest", data: plus(reg("pack.json", manifest)), entry: "pack.json", want: "duplicate"},
		{name: "paths differing in case", data: plus(reg("assets/a", nil), reg("assets/A", nil)), entry: "assets/A", want: "case"},
		{name: "missing pack.json", data: craft(t, reg("m.wasm", wasmStub)), entry: "pack.json", want: "missing"},
		{name: "invalid pack.json", data: craft(t, reg("pack.json", []byte(`{"name":1}`)), reg("m.wasm", wasmStub)), entry: "pack.json", want: "$.name"},
		{name: "undeclared file", data: plus(reg("build.sh", []byte("#!/bin/sh"))), entry: "build.sh", want: "not declared"},
		{name: "undeclared file in a directory", data: plus(reg("src/x.c", nil)), entry: "src/x.c", want: "not declared"},
		{name: "module missing", data: craft(t, reg("pack.json", manifest)), entry: "m.wasm", want: "missing"},
		{name: "module with wrong sha256", data: craft(t, reg("pack.json", manifest), reg("m.wasm", []byte("\x00asm tampered"))), entry: "m.wasm", want: "sha256 is"},
		{name: "manifest over its limit", data: craft(t, reg("pack.json", append(slices.Clone(manifest), make([]byte, 100)...)), reg("m.wasm", wasmStub)),
			lim: Limits{ManifestBytes: int64(len(manifest))}, entry: "pack.json", want: "more than", large: true},
		{name: "entry over its limit", data: plus(reg("assets/big", make([]byte, 1001))), lim: Limits{EntryBytes: 1000}, entry: "assets/big", want: "more than", large: true},
		{name: "content over the total", data: plus(reg("assets/a", make([]byte, 3000)), reg("assets/b", make([]byte, 3000))), lim: Limits{TotalBytes: 8000}, want: "uncompressed", large: true},
		{name: "too many entries", data: plus(reg("assets/a", nil), reg("assets/b", nil)), lim: Limits{Entries: 3}, want: "entries", large: true},
		{name: "content over the compression ratio", data: plus(reg("assets/zeros", make([]byte, RatioSlack+1<<20))), want: "compression ratio limit", large: true},
		{name: "content over a lower compression ratio", data: plus(reg("assets/a", bytes.Repeat([]byte("0123456789"), (RatioSlack+64<<10)/10))), lim: Limits{Ratio: 2}, want: "more than 2 times", large: true},
		{name: "archive over its limit", data: valid, lim: Limits{ArchiveBytes: int64(len(valid) - 1)}, want: "larger than", large: true},
		{name: "PAX global header", data: plus(entry{tar.Header{Name: "pax_global_header", Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "x"}}, nil}), entry: "pax_global_header", want: "PAX global header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.data), tc.lim)
			var fe *FormatError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidPack) {
				t.Fatalf("err = %v, want *FormatError", err)
			}
			if fe.Entry != tc.entry || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q (entry %q), want entry %q and %q", err, fe.Entry, tc.entry, tc.want)
			}
			if errors.Is(err, ErrTooLarge) != tc.large {
				t.Errorf("errors.Is(err, ErrTooLarge) = %v", !tc.large)
			}
		})
	}
}

func TestReadAccepts(t *testing.T) {
	ok := validEntries(t)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"directory entries", craft(t, append(ok, entry{tar.Header{Name: "assets/", Typeflag: tar.TypeDir, Mode: 0o755}, nil}, reg("assets/a", []byte("a")))...)},
		{"any order", craft(t, reg("assets/z", nil), ok[1], ok[0])},
		{"GNU tar record padding", gz(t, append(tarBytes(t, ok...), make([]byte, 10240)...))},
		{"other modes and owners", craft(t, entry{tar.Header{Name: "pack.json", Typeflag: tar.TypeReg, Mode: 0o755, Uid: 1000, Uname: "ada",
			ModTime: time.Now(), Size: ok[0].hdr.Size, Format: tar.FormatPAX}, ok[0].data}, ok[1])},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Read(bytes.NewReader(tc.data), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.IsSortedFunc(a.Files, func(x, y File) int { return strings.Compare(x.Path, y.Path) }) {
				t.Error("files not sorted")
			}
		})
	}
}

func tarBytes(t *testing.T, es ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range es {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		tw.Write(e.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// Decompression bombs stop at the limit: the producer, which generates the
// archive only as fast as Read consumes it, is never asked for much.
func TestDecompressionBomb(t *testing.T) {
	const gib = 1 << 30
	manifest := manifestJSON(t, map[string][]byte{"m.wasm": wasmStub})
	header := func(w io.Writer, tw *tar.Writer) error {
		for _, e := range []entry{reg("pack.json", manifest), reg("m.wasm", wasmStub)} {
			if err := tw.WriteHeader(&e.hdr); err != nil {
				return err
			}
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		lim  Limits
		gen  func(w io.Writer) error
		want string
		// most is the most the producer may have generated: what Read may
		// decompress plus the compressor's and the pipe's buffering, far
		// below 1 GiB.
		most int64
	}{
		{"one 1 GiB entry", Limits{}, func(w io.Writer) error {
			tw := tar.NewWriter(w)
			header(w, tw)
			tw.WriteHeader(&tar.Header{Name: "assets/zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: gib})
			return writeZeros(tw, gib)
		}, "more than", 32 << 20},
		{"100 MB manifest", Limits{}, func(w io.Writer) error {
			tw := tar.NewWriter(w)
			tw.WriteHeader(&tar.Header{Name: "pack.json", Typeflag: tar.TypeReg, Mode: 0o644, Size: 100 << 20})
			return writeZeros(tw, 100<<20)
		}, "more than", 32 << 20},
		{"1 GiB in 1 MiB entries", Limits{TotalBytes: 16 << 20}, func(w io.Writer) error {
			tw := tar.NewWriter(w)
			header(w, tw)
			for i := range gib / (1 << 20) {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("assets/z%08d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20}); err != nil {
					return err
				}
				if err := writeZeros(tw, 1<<20); err != nil {
					return err
				}
			}
			return tw.Close()
		}, "uncompressed", 48 << 20},
		{"1 GiB in 256 MiB entries, default limits", Limits{}, func(w io.Writer) error {
			tw := tar.NewWriter(w)
			header(w, tw)
			for i := range 4 {
				if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("assets/z%d", i), Typeflag: tar.TypeReg, Mode: 0o644, Size: 256 << 20}); err != nil {
					return err
				}
				if err := writeZeros(tw, 256<<20); err != nil {
					return err
				}
			}
			return tw.Close()
		}, "compression ratio limit", 32 << 20},
		{"1 GiB of padding after the tar end", Limits{TotalBytes: 16 << 20}, func(w io.Writer) error {
			tw := tar.NewWriter(w)
			header(w, tw)
			if err := tw.Close(); err != nil {
				return err
			}
			return writeZeros(w, gib)
		}, "uncompressed", 48 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStream(tc.gen)
			_, err := Read(s.r, tc.lim)
			s.stop()
			if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidPack) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v", err)
			}
			if p := s.produced.Load(); p > tc.most {
				t.Errorf("producer generated %d MiB", p>>20)
			} else {
				t.Logf("producer generated %d MiB", p>>20)
			}
		})
	}
}

// Pack refuses what Read would refuse by its compression ratio, which is
// checked as the archive is read, so a pack that builds also installs.
func TestPackKeepsToTheCompressionRatio(t *testing.T) {
	files := map[string][]byte{"pack.json": manifestJSON(t, map[string][]byte{"m.wasm": wasmStub}), "m.wasm": wasmStub}
	files["assets/zeros"] = make([]byte, RatioSlack)
	if _, err := Pack(writeDir(t, files)); err != nil {
		t.Fatalf("within the slack: %v", err)
	}
	files["assets/zeros"] = make([]byte, RatioSlack+1<<20)
	_, err := Pack(writeDir(t, files))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "compression ratio limit") {
		t.Fatalf("err = %v, want the compression ratio limit", err)
	}
}

// An installed pack's blob is read again without validating its manifest:
// ReadInstalled returns what Read returns, and refuses bytes that are not
// the ones installed or whose modules do not match.
func TestReadInstalled(t *testing.T) {
	data := craft(t, validEntries(t)...)
	want, err := Read(bytes.NewReader(data), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := DecodeStoredManifest(want.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadInstalled(bytes.NewReader(data), Limits{}, want.SHA256, m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ReadInstalled = %+v, want %+v", got, want)
	}
	other := craft(t, append(validEntries(t), reg("assets/x", []byte("x")))...)
	if _, err := ReadInstalled(bytes.NewReader(other), Limits{}, want.SHA256, m); !errors.Is(err, ErrInvalidPack) || !strings.Contains(err.Error(), "not the "+want.SHA256) {
		t.Errorf("other bytes: %v", err)
	}
	bad := craft(t, validEntries(t)[0], reg("m.wasm", []byte("\x00asm\x01\x00\x00\x00tampered")))
	if _, err := ReadInstalled(bytes.NewReader(bad), Limits{}, sha(bad), m); !errors.Is(err, ErrInvalidPack) {
		t.Errorf("module digest: %v", err)
	}
}

// DecodeStoredManifest gives what DecodeManifest gives for every manifest
// DecodeManifest accepts: the examples, and one using every field.
func TestDecodeStoredManifest(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*/pack.json")
	docs := [][]byte{[]byte(`{
	  "name": "vendor.acme.full", "version": "1.2.3-rc.1+b", "description": "d", "license": "MIT",
	  "runtime": {"language": "wasm", "abi": {"version": 1, "minor": 0},
	    "modules": [{"path": "a.wasm", "sha256": "` + sum0 + `"}],
	    "limits": {"memoryPages": 2, "timeoutMs": 5, "outputBytes": 7, "hostCalls": 9}},
	  "nodes": [{"typeId": "a.b", "kind": "skill", "module": "a.wasm", "export": "run", "description": "x",
	    "inputSchema": {"type": "object",  "properties": {"z": {"type": "string"}, "a": {"enum": [1, 2.5, "x"]}}},
	    "outputSchema": true, "taskTypes": ["t.one", "t.two"]}],
	  "grants": {"services": ["memory", "adapters"], "adapters": ["http"], "memoryNamespaces": ["ns"]}
	}`)}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	for _, b := range docs {
		want, err := DecodeManifest(b)
		if err != nil {
			t.Fatalf("%.60s: %v", b, err)
		}
		got, err := DecodeStoredManifest(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeStoredManifest(%.60s)\n got %+v\nwant %+v", b, got, want)
		}
	}
}
