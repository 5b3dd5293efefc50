package packs

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
)

// File is one file of a pack.
type File struct {
	Path string // slash-separated, relative to the pack root
	Data []byte
}

// Archive is a .pack that Read accepted.
type Archive struct {
	Manifest *Manifest
	// ManifestBytes is pack.json exactly as stored; for an openwop pack,
	// the JSON of its translation into packrun's model (Manifest.Openwop
	// set), pack.json as written being in Files.
	ManifestBytes []byte
	// Files holds every file, pack.json included, sorted by path.
	Files []File
	// SHA256 is the lowercase hex digest of the archive bytes as read.
	SHA256 string
	// Size is the length of the archive in bytes.
	Size int64
}

// File returns the content of the file at path.
func (a *Archive) File(path string) ([]byte, bool) {
	i, ok := slices.BinarySearchFunc(a.Files, path, func(f File, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return nil, false
	}
	return a.Files[i].Data, true
}

// SourceDigest is the digest of the archive's content (see SourceDigest); it
// does not depend on compression.
func (a *Archive) SourceDigest() string { return digestFiles(a.Files) }

// Read reads a .pack (gzip-compressed tar) from untrusted bytes and checks
// it: every entry is a regular file (directories are skipped) with a
// relative, clean path (a "./" prefix is dropped); no path appears twice
// (also ignoring case); pack.json is present and valid; every file is
// pack.json, a module the manifest lists, or under assets/ (an openwop
// pack, whose pack.json is translated, may hold other files); every module
// is present and matches its sha256; sizes, counts and the compression ratio stay within lim (zero
// fields: DefaultLimits()). Nothing is trusted from headers: decompression
// stops at the first limit reached.
// Refusals are *FormatError, matched by ErrInvalidPack.
func Read(r io.Reader, lim Limits) (*Archive, error) {
	return read(r, lim, "", nil)
}

// ReadInstalled reads an archive Read accepted before and that is known by
// its digest, such as an installed pack's blob: the bytes must hash to
// sha256, and m is the manifest decoded when it was installed, so the
// manifest is not validated again (no schema compiled, no pattern matched).
// Limits, the archive's structure and the modules' digests are checked as
// Read checks them; a digest that differs is a *FormatError matched by
// ErrInvalidPack.
func ReadInstalled(r io.Reader, lim Limits, sha256 string, m *Manifest) (*Archive, error) {
	if m == nil {
		return nil, errors.New("packs.ReadInstalled: no manifest")
	}
	return read(r, lim, sha256, m)
}

func read(r io.Reader, lim Limits, want string, m *Manifest) (*Archive, error) {
	lim = lim.orDefault()
	h := sha256.New()
	src := &capReader{r: r, max: lim.ArchiveBytes, h: h}
	br := bufio.NewReader(src) // an io.ByteReader, so gzip reads no further than its stream
	files, err := readTar(br, src, lim)
	if err != nil {
		return nil, err
	}
	// Read to the end so the digest covers every byte; nothing may follow
	// the gzip stream.
	if n, err := io.Copy(io.Discard, br); err != nil || n > 0 {
		if src.over {
			return nil, formatErr("", ErrTooLarge, "archive is larger than %d bytes", lim.ArchiveBytes)
		}
		if err != nil {
			return nil, formatErr("", err, "reading archive")
		}
		return nil, formatErr("", nil, "%d bytes of data after the gzip stream", n)
	}
	a := &Archive{Files: files, SHA256: hex.EncodeToString(h.Sum(nil)), Size: src.n}
	if want != "" && a.SHA256 != want {
		return nil, formatErr("", nil, "archive has sha256 %s, not the %s it was installed as", a.SHA256, want)
	}
	if err := a.check(m); err != nil {
		return nil, err
	}
	return a, nil
}

// readTar decompresses and reads the entries of a pack, enforcing limits.
func readTar(br *bufio.Reader, src *capReader, lim Limits) ([]File, error) {
	corrupt := func(err error) error {
		if src.over {
			return formatErr("", ErrTooLarge, "archive is larger than %d bytes", lim.ArchiveBytes)
		}
		return formatErr("", err, "corrupt archive")
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, corrupt(fmt.Errorf("not gzip-compressed: %w", err))
	}
	zr.Multistream(false)
	plain := &capReader{r: zr, max: lim.TotalBytes, of: src, ratio: lim.Ratio}
	tooBig := func() error {
		if plain.ratioHit {
			return formatErr("", ErrTooLarge, "archive content expands more than %d times its compressed size (compression ratio limit): %d bytes uncompressed from the first %d", lim.Ratio, plain.n, src.n)
		}
		return formatErr("", ErrTooLarge, "archive content is larger than %d bytes uncompressed", lim.TotalBytes)
	}
	tr := tar.NewReader(plain)
	var (
		files   []File
		seen    = map[string]string{} // lower-case path -> path
		entries int
		total   int64
	)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if plain.over {
				return nil, tooBig()
			}
			return nil, corrupt(err)
		}
		entries++
		if entries > lim.Entries {
			return nil, formatErr("", ErrTooLarge, "more than %d entries", lim.Entries)
		}
		// openwop's registry tarballs prefix every entry with "./" and
		// hold the "./" directory itself: the same paths, relative.
		name := strings.TrimPrefix(hdr.Name, "./")
		if hdr.Typeflag == tar.TypeDir {
			name = strings.TrimSuffix(name, "/")
			if name == "" || name == "." {
				continue
			}
		}
		if reason := checkPath(name); reason != "" {
			return nil, formatErr(hdr.Name, nil, "%s", reason)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg: // the reader reports the old TypeRegA as TypeReg
		default:
			return nil, formatErr(name, nil, "%s; a pack holds only regular files", entryKind(hdr.Typeflag))
		}
		for k := range hdr.PAXRecords {
			if strings.HasPrefix(k, "GNU.sparse.") {
				return nil, formatErr(name, nil, "sparse file; a pack holds only regular files")
			}
		}
		if prev, dup := seen[strings.ToLower(name)]; dup {
			if prev == name {
				return nil, formatErr(name, nil, "duplicate entry")
			}
			return nil, formatErr(name, nil, "same path as %q except for case", prev)
		}
		seen[strings.ToLower(name)] = name
		max := lim.EntryBytes
		if name == ManifestName {
			max = lim.ManifestBytes
		}
		if hdr.Size < 0 || hdr.Size > max {
			return nil, formatErr(name, ErrTooLarge, "%d bytes, more than the %d allowed", hdr.Size, max)
		}
		if hdr.Size > lim.TotalBytes-total {
			return nil, tooBig()
		}
		// The header's size bounds the read, and so do the limits: a lying
		// header cannot make this read past max or allocate ahead of data.
		var buf bytes.Buffer
		buf.Grow(int(min(hdr.Size, 64<<10)))
		n, err := buf.ReadFrom(io.LimitReader(tr, max+1))
		if err != nil {
			if plain.over {
				return nil, tooBig()
			}
			return nil, corrupt(fmt.Errorf("%s: %w", name, err))
		}
		if n != hdr.Size {
			return nil, corrupt(fmt.Errorf("%s: %d bytes, header says %d", name, n, hdr.Size))
		}
		total += n
		files = append(files, File{Path: name, Data: buf.Bytes()})
	}
	// What follows the end-of-archive marker must be zero padding; reading
	// it to the end of the gzip stream also checks the gzip checksum.
	pad := make([]byte, 32<<10)
	for {
		n, err := plain.Read(pad)
		if slices.ContainsFunc(pad[:n], func(b byte) bool { return b != 0 }) {
			return nil, formatErr("", nil, "data after the end of the tar archive")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			if plain.over {
				return nil, tooBig()
			}
			return nil, corrupt(err)
		}
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, nil
}

// check validates the manifest (unless m, decoded before, is given) and
// that the files are exactly what it declares. An openwop pack.json is
// translated (checkOpenwop) every time, whatever m says.
func (a *Archive) check(m *Manifest) error {
	mb, ok := a.File(ManifestName)
	if !ok {
		return formatErr(ManifestName, nil, "missing; every pack has a manifest at its root")
	}
	if IsOpenwopManifest(mb) {
		return a.checkOpenwop(mb)
	}
	if m == nil {
		var err error
		if m, err = DecodeManifest(mb); err != nil {
			return formatErr(ManifestName, err, "invalid manifest")
		}
	}
	a.Manifest, a.ManifestBytes = m, mb
	for _, f := range a.Files {
		if !declared(m, f.Path) {
			return formatErr(f.Path, nil, "not declared: a pack holds only %s, the modules it lists and files under %s/", ManifestName, AssetsDir)
		}
	}
	for _, mod := range m.Runtime.Modules {
		data, ok := a.File(mod.Path)
		if !ok {
			return formatErr(mod.Path, nil, "module listed in %s is missing from the archive", ManifestName)
		}
		if err := checkDigest(mod, data); err != nil {
			return err
		}
	}
	return a.checkSkillPaths(m)
}

// checkOpenwop translates an openwop pack.json (TranslateOpenwop): the
// archive's Manifest is the translation and ManifestBytes its JSON, which
// is what the store records; pack.json as written stays in Files. An
// openwop pack may hold other files (README.md, schemas/, keys/,
// pack.json.sig): they are kept and never run.
func (a *Archive) checkOpenwop(mb []byte) error {
	m, err := TranslateOpenwop(mb, a.File)
	if err != nil {
		return formatErr(ManifestName, err, "invalid openwop manifest")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return formatErr(ManifestName, err, "encoding the translated manifest")
	}
	a.Manifest, a.ManifestBytes = m, b
	return nil
}

// checkSkillPaths checks that every path a skill manifest names is a file
// under assets/.
func (a *Archive) checkSkillPaths(m *Manifest) error {
	for _, n := range m.Nodes {
		if n.Skill == nil {
			continue
		}
		for _, sp := range n.Skill.Paths() {
			if _, ok := a.File(AssetsDir + "/" + sp.Path); !ok {
				return formatErr(ManifestName, nil, "node %s: skill.%s: %s/%s is not in the pack", n.TypeID, sp.Field, AssetsDir, sp.Path)
			}
		}
	}
	return nil
}

// declared reports whether a file at p belongs in a pack with manifest m.
func declared(m *Manifest, p string) bool {
	if p == ManifestName || strings.HasPrefix(p, AssetsDir+"/") {
		return true
	}
	_, ok := m.Module(p)
	return ok
}

func checkDigest(mod Module, data []byte) error {
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != mod.SHA256 {
		return formatErr(mod.Path, nil, "sha256 is %s but %s says %s", got, ManifestName, mod.SHA256)
	}
	return nil
}

func entryKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeFifo:
		return "named pipe"
	case tar.TypeCont:
		return "contiguous file"
	case tar.TypeGNUSparse:
		return "sparse file"
	case tar.TypeXGlobalHeader:
		return "PAX global header"
	}
	return fmt.Sprintf("entry of type %q", t)
}

// capReader reads at most max bytes from r, then fails with ErrTooLarge and
// sets over. It counts what it passed on and feeds it to h, if set. With of
// set, it also fails (and sets over and ratioHit) once it has passed more
// than RatioSlack bytes plus ratio times what of has passed.
type capReader struct {
	r        io.Reader
	max      int64
	n        int64
	over     bool
	h        hash.Hash
	of       *capReader
	ratio    int64
	ratioHit bool
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.over {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.max-c.n+1 {
		p = p[:c.max-c.n+1]
	}
	n, err := c.r.Read(p)
	if c.n+int64(n) > c.max {
		c.over = true
		n = int(c.max - c.n)
		err = ErrTooLarge
	}
	c.n += int64(n)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	// (n - slack) / ratio > of.n, written so that it cannot overflow.
	if c.of != nil && !c.over && c.n > RatioSlack && (c.n-RatioSlack)/c.ratio > c.of.n {
		c.over, c.ratioHit = true, true
		err = ErrTooLarge
	}
	return n, err
}

// MaxAssetBytes bounds a file a node reads from its pack's assets/
// (asset_read): a larger one is refused.
const MaxAssetBytes = 1 << 20

// ErrAssetPath is a path that does not name a file under assets/: absolute,
// with a ".." component, not clean.
var ErrAssetPath = errors.New("not a path under assets/")

// Asset returns the file at p, relative to the pack's assets/ directory.
// A path that could leave assets/ is refused with ErrAssetPath; ok is false
// when the pack has no such file.
func (a *Archive) Asset(p string) (data []byte, ok bool, err error) {
	if reason := checkPath(p); reason != "" {
		return nil, false, fmt.Errorf("%w: %s", ErrAssetPath, reason)
	}
	data, ok = a.File(AssetsDir + "/" + p)
	return data, ok, nil
}
