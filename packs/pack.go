package packs

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"
)

// Source is the content of a pack, collected from a directory by Collect.
type Source struct {
	Manifest *Manifest
	// Files are pack.json, the modules and the assets, sorted by path.
	Files []File
	// Skipped lists what is in the directory but not packed (sources, build
	// scripts, READMEs), so callers can show it; a directory not packed at
	// all is listed once, with a trailing slash.
	Skipped []string
}

// Collect gathers the pack in dir. The manifest decides what is packed:
// pack.json, every module it lists, and every file under assets/. Other
// files in dir are left out and listed in Source.Skipped.
//
// It refuses, with a *FormatError naming the file: an invalid pack.json; a
// listed module that is missing or whose sha256 differs from the manifest;
// a symbolic link or any other non-regular file among what would be packed
// (pack.json, a module, the assets/ tree or a directory on the way to one);
// file names that are not portable (see the path rules of Read), or that
// differ only in case; content beyond DefaultLimits().
func Collect(dir string) (*Source, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", dir, err)
	}
	defer root.Close()
	lim := DefaultLimits().orDefault()

	mb, err := readRegular(root, ManifestName, lim.ManifestBytes)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifest(mb)
	if err != nil {
		return nil, formatErr(ManifestName, err, "invalid manifest")
	}
	s := &Source{Manifest: m, Files: []File{{ManifestName, mb}}}
	included := map[string]bool{ManifestName: true}
	for _, mod := range m.Runtime.Modules {
		data, err := readRegular(root, mod.Path, lim.EntryBytes)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, formatErr(mod.Path, nil, "module listed in %s not found", ManifestName)
		}
		if err != nil {
			return nil, err
		}
		if err := checkDigest(mod, data); err != nil {
			return nil, err
		}
		s.Files = append(s.Files, File{mod.Path, data})
		included[mod.Path] = true
	}
	if err := s.collectAssets(root, included, lim); err != nil {
		return nil, err
	}
	slices.SortFunc(s.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })

	var total int64
	folded := map[string]string{}
	for _, f := range s.Files {
		total += int64(len(f.Data))
		if prev, dup := folded[strings.ToLower(f.Path)]; dup {
			return nil, formatErr(f.Path, nil, "same path as %q except for case", prev)
		}
		folded[strings.ToLower(f.Path)] = f.Path
	}
	if len(s.Files) > lim.Entries {
		return nil, formatErr("", ErrTooLarge, "%d files, more than the %d allowed", len(s.Files), lim.Entries)
	}
	if total > lim.TotalBytes {
		return nil, formatErr("", ErrTooLarge, "%d bytes of content, more than the %d allowed", total, lim.TotalBytes)
	}
	s.Skipped = skipped(root, included)
	return s, nil
}

func (s *Source) collectAssets(root *os.Root, included map[string]bool, lim Limits) error {
	fi, err := root.Lstat(AssetsDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("pack: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return formatErr(AssetsDir, nil, "symbolic link; %s/ must be a directory in the pack", AssetsDir)
	case !fi.IsDir():
		return formatErr(AssetsDir, nil, "not a directory")
	}
	return fs.WalkDir(root.FS(), AssetsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("pack: %w", err)
		}
		if reason := checkPath(p); reason != "" {
			return formatErr(p, nil, "%s", reason)
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			return formatErr(p, nil, "symbolic link; a pack holds only regular files")
		case d.IsDir():
			return nil
		case !t.IsRegular():
			return formatErr(p, nil, "not a regular file")
		}
		if included[p] { // also a module
			return nil
		}
		data, err := readRegular(root, p, lim.EntryBytes)
		if err != nil {
			return err
		}
		s.Files = append(s.Files, File{p, data})
		included[p] = true
		return nil
	})
}

// readRegular reads the file p of root, refusing symbolic links on the way
// and anything but a regular file of at most max bytes.
func readRegular(root *os.Root, p string, max int64) ([]byte, error) {
	if reason := checkPath(p); reason != "" {
		return nil, formatErr(p, nil, "%s", reason)
	}
	segs := strings.Split(p, "/")
	for i := range segs {
		q := strings.Join(segs[:i+1], "/")
		fi, err := root.Lstat(q)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, formatErr(p, fs.ErrNotExist, "not found")
			}
			return nil, fmt.Errorf("pack: %w", err)
		}
		last := i == len(segs)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, formatErr(q, nil, "symbolic link; a pack holds only regular files")
		case !last && !fi.IsDir():
			return nil, formatErr(q, nil, "not a directory")
		case last && !fi.Mode().IsRegular():
			return nil, formatErr(p, nil, "not a regular file")
		case last && fi.Size() > max:
			return nil, formatErr(p, ErrTooLarge, "%d bytes, more than the %d allowed", fi.Size(), max)
		}
	}
	f, err := root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("pack: read %s: %w", p, err)
	}
	if int64(len(data)) > max {
		return nil, formatErr(p, ErrTooLarge, "more than %d bytes", max)
	}
	return data, nil
}

// skipped lists what under root is not included, without descending into
// directories that hold nothing included.
func skipped(root *os.Root, included map[string]bool) []string {
	var out []string
	// The callback never fails (an unreadable directory lists nothing below
	// it), so neither does the walk.
	_ = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case p == ".":
			return nil
		case p == AssetsDir:
			return fs.SkipDir
		case d != nil && d.IsDir():
			for q := range included {
				if strings.HasPrefix(q, p+"/") {
					return nil
				}
			}
			out = append(out, p+"/")
			return fs.SkipDir
		case !included[p]:
			out = append(out, p)
		}
		return nil
	})
	return out
}

// WriteTo writes the pack as a deterministic gzip-compressed tar: regular
// files only, sorted by path, mode 0644, owner 0:0 without names, mtime the
// Unix epoch, no access or change times; gzip at best compression with no
// file name, no mtime and OS "unknown". The same Source always gives the
// same bytes with the same Go release (compress/flate output may change
// between releases; SourceDigest does not depend on it).
func (s *Source) WriteTo(w io.Writer) (int64, error) {
	n, _, err := s.write(w)
	return n, err
}

func (s *Source) write(w io.Writer) (compressed, plain int64, err error) {
	cw := &countWriter{w: w}
	zw, err := gzip.NewWriterLevel(cw, gzip.BestCompression)
	if err != nil {
		return 0, 0, err
	}
	zw.Header = gzip.Header{OS: 255}
	pw := &countWriter{w: zw}
	tw := tar.NewWriter(pw)
	for _, f := range s.Files {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Path,
			Size:     int64(len(f.Data)),
			Mode:     0o644,
			ModTime:  time.Unix(0, 0),
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return cw.n, pw.n, fmt.Errorf("pack %s: %w", f.Path, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return cw.n, pw.n, fmt.Errorf("pack %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return cw.n, pw.n, fmt.Errorf("pack: %w", err)
	}
	if err := zw.Close(); err != nil {
		return cw.n, pw.n, fmt.Errorf("pack: %w", err)
	}
	return cw.n, pw.n, nil
}

// Digest returns SourceDigest of the collected content.
func (s *Source) Digest() string { return digestFiles(s.Files) }

// Pack builds the .pack archive of dir (see Collect and Source.WriteTo).
// Packing the same content twice gives the same bytes, whatever the files'
// times, modes and owners. The result is refused if Read would refuse it
// with DefaultLimits().
func Pack(dir string) ([]byte, error) {
	s, err := Collect(dir)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	_, plain, err := s.write(&buf)
	if err != nil {
		return nil, err
	}
	lim := DefaultLimits().orDefault()
	if plain > lim.TotalBytes {
		return nil, formatErr("", ErrTooLarge, "archive content is %d bytes uncompressed, more than the %d allowed", plain, lim.TotalBytes)
	}
	if int64(buf.Len()) > lim.ArchiveBytes {
		return nil, formatErr("", ErrTooLarge, "archive is %d bytes, more than the %d allowed", buf.Len(), lim.ArchiveBytes)
	}
	// The compression ratio is checked as the archive is read, not only in
	// total; reading it back is the one sure way to know Read accepts it.
	if _, err := Read(bytes.NewReader(buf.Bytes()), DefaultLimits()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// SourceDigest returns the lowercase hex sha256 of the content Pack would
// put in the archive of dir; it is the source digest of the pack's SLSA
// provenance. It is computed over the sorted list of files, one line each:
// the hex sha256 of the file, two spaces, its path, a newline (the format of
// sha256sum, as in Go's dirhash). It does not depend on compression or tar
// framing, so Archive.SourceDigest gives the same value for the archive.
func SourceDigest(dir string) (string, error) {
	s, err := Collect(dir)
	if err != nil {
		return "", err
	}
	return s.Digest(), nil
}

func digestFiles(files []File) string {
	sorted := slices.SortedFunc(slices.Values(files), func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	h := sha256.New()
	for _, f := range sorted {
		sum := sha256.Sum256(f.Data)
		fmt.Fprintf(h, "%x  %s\n", sum, f.Path)
	}
	return hex.EncodeToString(h.Sum(nil))
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
