package hosttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"maps"
	"slices"
	"strings"
	"testing"
)

// OpenwopTarball is an openwop registry tarball of files (path -> bytes)
// laid out as openwop's publisher writes them: a "./" directory entry,
// then every directory and file under "./", in path order.
func OpenwopTarball(t testing.TB, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(h *tar.Header, data []byte) {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add(&tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	dirs := map[string]bool{}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		for i := range p {
			if d := p[:i+1]; p[i] == '/' && !dirs[d] {
				dirs[d] = true
				add(&tar.Header{Name: "./" + d, Typeflag: tar.TypeDir, Mode: 0o755}, nil)
			}
		}
		add(&tar.Header{Name: "./" + strings.TrimPrefix(p, "./"), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(files[p]))}, files[p])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
