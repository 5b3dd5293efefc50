package sqlite

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
)

// testPack is a pack as the Host would install it: its record and blobs.
// The store verifies nothing, so the archive is any bytes.
type testPack struct {
	rec   *host.InstalledPack
	blobs host.PackBlobs
}

// newTestPack makes name@version with an archive of size bytes derived
// from name, version and salt (the same arguments give the same archive),
// a bundle and a provenance bundle.
func newTestPack(name, version, salt string, size int) testPack {
	seed := blobs.Digest([]byte(name + "@" + version + "/" + salt))
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64([]byte(seed[:8])), binary.LittleEndian.Uint64([]byte(seed[8:16]))))
	archive := make([]byte, size)
	for i := range archive {
		archive[i] = byte(r.Uint32())
	}
	return testPack{
		rec: &host.InstalledPack{
			Name: name, Version: version, Signer: "key:test", KeyID: "kid-" + name,
			Provenance: &host.PackProvenance{BuilderID: "https://ci.example/builder@v1", BuildType: "https://example/build", SourceDigest: strings.Repeat("ab", 32),
				BuiltAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), Signer: "key:test"},
			Manifest: json.RawMessage(fmt.Sprintf(`{"name":%q,"version":%q}`, name, version)),
		},
		blobs: host.PackBlobs{
			Archive:    archive,
			Bundle:     []byte(`{"bundle":"` + name + "@" + version + "/" + salt + `"}`),
			Provenance: []byte(`{"provenance":"` + name + "@" + version + "/" + salt + `"}`),
		},
	}
}

func mustInstall(t testing.TB, s *Store, p testPack) *host.InstalledPack {
	t.Helper()
	got, already, err := s.InstallPack(ctx, p.rec, p.blobs)
	if err != nil || already {
		t.Fatalf("install %s: %v (already %v)", p.rec.Ref(), err, already)
	}
	return got
}

func mustList(t testing.TB, s *Store) []*host.InstalledPack {
	t.Helper()
	all, err := s.ListPacks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func refs(ps []*host.InstalledPack) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Ref())
	}
	return out
}

// blobNames lists the pack blob directory, temporary files included.
func blobNames(t testing.TB, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(s.opts.PackBlobDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestInstallListUninstallPacks(t *testing.T) {
	f := newFixture(t, Options{})
	if want := filepath.Join(filepath.Dir(f.path), "blobs", "sha256"); f.opts.PackBlobDir != want {
		t.Fatalf("default PackBlobDir %s, want %s", f.opts.PackBlobDir, want)
	}
	var first testPack // what was installed as 1.0.0
	for _, v := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1", "10.0.0", "2.0.0"} {
		p := newTestPack("vendor.acme.hello", v, "", 4096)
		if v == "1.0.0" {
			first = p
		}
		got := mustInstall(t, f.Store, p)
		if got.SHA256 != blobs.Digest(p.blobs.Archive) || got.Size != 4096 || got.BundleSHA256 != blobs.Digest(p.blobs.Bundle) ||
			got.ProvenanceSHA256 != blobs.Digest(p.blobs.Provenance) || got.SignatureSHA256 != "" {
			t.Fatalf("install %s: record %+v", v, got)
		}
		if p.rec.SHA256 != "" || !p.rec.InstalledAt.IsZero() {
			t.Fatalf("install modified the caller's record: %+v", p.rec)
		}
	}
	mustInstall(t, f.Store, newTestPack("vendor.acme.bye", "0.1.0", "", 100))
	mustInstall(t, f.Store, newTestPack("vendor.acme.zed", "not-semver", "", 100))
	mustInstall(t, f.Store, newTestPack("vendor.acme.zed", "also-not", "", 100))

	all := mustList(t, f.Store)
	want := []string{"vendor.acme.bye@0.1.0", "vendor.acme.hello@10.0.0", "vendor.acme.hello@2.0.0", "vendor.acme.hello@2.0.0-rc.1",
		"vendor.acme.hello@1.2.0", "vendor.acme.hello@1.0.0", "vendor.acme.zed@not-semver", "vendor.acme.zed@also-not"}
	if got := refs(all); !slices.Equal(got, want) {
		t.Fatalf("list:\n got %v\nwant %v", got, want)
	}
	var rec *host.InstalledPack
	for _, p := range all {
		if p.Ref() == "vendor.acme.hello@1.0.0" {
			rec = p
		}
	}
	wantAt := f.clock.Now().UTC().Truncate(time.Millisecond)
	if !rec.InstalledAt.Equal(wantAt) || rec.InstalledAt.Location() != time.UTC {
		t.Fatalf("installed at %v, want %v (UTC)", rec.InstalledAt, wantAt)
	}
	if rec.Signer != "key:test" || rec.KeyID != "kid-vendor.acme.hello" || !bytes.Equal(rec.Manifest, first.rec.Manifest) ||
		rec.Provenance == nil || *rec.Provenance != *first.rec.Provenance {
		t.Fatalf("listed record %+v (provenance %+v)", rec, rec.Provenance)
	}
	for d, want := range map[string][]byte{rec.SHA256: first.blobs.Archive, rec.BundleSHA256: first.blobs.Bundle, rec.ProvenanceSHA256: first.blobs.Provenance} {
		if got, err := f.PackBlob(ctx, d); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("pack blob %s: %v", d[:12], err)
		}
	}

	// The identical archive again, with other bundles (signed again): a
	// no-op that returns the first record and keeps the first bundles.
	gen := f.PacksGeneration()
	again := newTestPack("vendor.acme.hello", "1.0.0", "", 4096)
	again.blobs.Bundle = []byte(`{"bundle":"signed again"}`)
	f.clock.Add(time.Hour)
	blobsBefore := blobNames(t, f.Store)
	got, already, err := f.InstallPack(ctx, again.rec, again.blobs)
	if err != nil || !already {
		t.Fatalf("reinstall: %v already=%v", err, already)
	}
	if got.BundleSHA256 != rec.BundleSHA256 || !got.InstalledAt.Equal(rec.InstalledAt) {
		t.Fatalf("reinstall returned %+v, want the installed record %+v", got, rec)
	}
	if f.PacksGeneration() != gen {
		t.Fatal("a reinstall that changed nothing moved the generation")
	}
	if after := blobNames(t, f.Store); !slices.Equal(after, blobsBefore) {
		t.Fatalf("a reinstall wrote blobs: %v -> %v", blobsBefore, after)
	}

	// Uninstall 1.x (as listed records), then everything else by
	// name@version alone.
	var ones, rest []*host.InstalledPack
	for _, p := range all {
		if p.Name == "vendor.acme.hello" && strings.HasPrefix(p.Version, "1.") {
			ones = append(ones, p)
		} else {
			rest = append(rest, &host.InstalledPack{Name: p.Name, Version: p.Version})
		}
	}
	if err := f.UninstallPacks(ctx, ones); err != nil {
		t.Fatal(err)
	}
	if f.PacksGeneration() == gen {
		t.Fatal("uninstall did not move the generation")
	}
	if got := refs(mustList(t, f.Store)); len(got) != 6 || slices.Contains(got, "vendor.acme.hello@1.0.0") {
		t.Fatalf("after uninstalling 1.x: %v", got)
	}
	if _, err := f.PackBlob(ctx, rec.SHA256); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("archive of an uninstalled pack: %v, want it swept", err)
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.UninstallPacks(ctx, rest); err != nil {
		t.Fatal(err)
	}
	if all := mustList(t, f.Store); len(all) != 0 {
		t.Fatalf("%d packs left", len(all))
	}
	if left := blobNames(t, f.Store); len(left) != 0 {
		t.Fatalf("blobs left after uninstalling everything: %v", left)
	}
	if err := f.UninstallPacks(ctx, nil); err != nil {
		t.Fatalf("uninstall nothing: %v", err)
	}
}

func TestInstallPackConflict(t *testing.T) {
	f := newFixture(t, Options{})
	installed := mustInstall(t, f.Store, newTestPack("vendor.acme.hello", "1.0.0", "", 1000))
	gen := f.PacksGeneration()
	blobsBefore := blobNames(t, f.Store)
	other := newTestPack("vendor.acme.hello", "1.0.0", "different", 1000)
	_, already, err := f.InstallPack(ctx, other.rec, other.blobs)
	if !errors.Is(err, host.ErrPackConflict) || already {
		t.Fatalf("err = %v (already %v), want ErrPackConflict", err, already)
	}
	for _, d := range []string{installed.SHA256, blobs.Digest(other.blobs.Archive)} {
		if !strings.Contains(err.Error(), d[:12]) {
			t.Errorf("conflict message %q does not name %s", err, d[:12])
		}
	}
	if all := mustList(t, f.Store); len(all) != 1 || all[0].SHA256 != installed.SHA256 {
		t.Fatalf("the conflict changed the index: %v", refs(all))
	}
	if after := blobNames(t, f.Store); !slices.Equal(after, blobsBefore) {
		t.Fatalf("the conflict wrote blobs: %v -> %v", blobsBefore, after)
	}
	if f.PacksGeneration() != gen {
		t.Fatal("a refused install moved the generation")
	}
}

func TestInstallPackRefusesInconsistentRecords(t *testing.T) {
	f := newFixture(t, Options{})
	p := newTestPack("vendor.acme.hello", "1.0.0", "", 100)
	other := blobs.Digest([]byte("other"))
	for name, mod := range map[string]func(*host.InstalledPack, *host.PackBlobs){
		"nil archive":            func(_ *host.InstalledPack, b *host.PackBlobs) { b.Archive = nil },
		"no name":                func(r *host.InstalledPack, _ *host.PackBlobs) { r.Name = "" },
		"no version":             func(r *host.InstalledPack, _ *host.PackBlobs) { r.Version = "" },
		"no manifest":            func(r *host.InstalledPack, _ *host.PackBlobs) { r.Manifest = nil },
		"archive digest differs": func(r *host.InstalledPack, _ *host.PackBlobs) { r.SHA256 = other },
		"size differs":           func(r *host.InstalledPack, _ *host.PackBlobs) { r.Size = 99 },
		"bundle digest differs":  func(r *host.InstalledPack, _ *host.PackBlobs) { r.BundleSHA256 = other },
		"bundle named, not given": func(r *host.InstalledPack, b *host.PackBlobs) {
			r.BundleSHA256, b.Bundle = blobs.Digest(b.Bundle), nil
		},
		"signature named, not given": func(r *host.InstalledPack, _ *host.PackBlobs) { r.SignatureSHA256 = other },
	} {
		t.Run(name, func(t *testing.T) {
			rec, b := *p.rec, p.blobs
			mod(&rec, &b)
			if _, _, err := f.InstallPack(ctx, &rec, b); !errors.Is(err, host.ErrValidation) {
				t.Fatalf("err = %v, want ErrValidation", err)
			}
		})
	}
	if _, _, err := f.InstallPack(ctx, nil, p.blobs); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("nil record: %v", err)
	}
	if all := mustList(t, f.Store); len(all) != 0 {
		t.Fatalf("refused installs stored %v", refs(all))
	}
	if left := blobNames(t, f.Store); len(left) != 0 {
		t.Fatalf("refused installs wrote blobs: %v", left)
	}
	// Digests and size the caller fills in correctly, and its own
	// installation time, are taken.
	rec := *p.rec
	rec.SHA256, rec.Size = blobs.Digest(p.blobs.Archive), int64(len(p.blobs.Archive))
	rec.InstalledAt = time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600))
	got := mustInstall(t, f.Store, testPack{&rec, p.blobs})
	if !got.InstalledAt.Equal(rec.InstalledAt) || got.InstalledAt.Location() != time.UTC {
		t.Fatalf("installed at %v, want %v in UTC", got.InstalledAt, rec.InstalledAt)
	}
	if l := mustList(t, f.Store); !l[0].InstalledAt.Equal(rec.InstalledAt) {
		t.Fatalf("listed installed at %v, want %v", l[0].InstalledAt, rec.InstalledAt)
	}
}

func TestUninstallPacksUnknown(t *testing.T) {
	f := newFixture(t, Options{})
	a := mustInstall(t, f.Store, newTestPack("vendor.acme.a", "1.0.0", "", 100))
	gen := f.PacksGeneration()
	for name, rs := range map[string][]*host.InstalledPack{
		"one unknown of two": {a, {Name: "vendor.acme.b", Version: "1.0.0"}},
		"unknown version":    {{Name: "vendor.acme.a", Version: "1.0.1"}},
		"another archive":    {{Name: "vendor.acme.a", Version: "1.0.0", SHA256: blobs.Digest([]byte("x"))}},
		"nil among the refs": {a, nil},
		"empty ref":          {{}},
	} {
		t.Run(name, func(t *testing.T) {
			err := f.UninstallPacks(ctx, rs)
			if name == "nil among the refs" {
				if !errors.Is(err, host.ErrValidation) {
					t.Fatalf("err = %v, want ErrValidation", err)
				}
				return
			}
			if !errors.Is(err, host.ErrPackNotInstalled) {
				t.Fatalf("err = %v, want ErrPackNotInstalled", err)
			}
		})
	}
	if all := mustList(t, f.Store); len(all) != 1 {
		t.Fatalf("a refused uninstall removed packs: %v", refs(all))
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatalf("a refused uninstall swept blobs: %v", err)
	}
	if f.PacksGeneration() != gen {
		t.Fatal("a refused uninstall moved the generation")
	}
	// The same pack twice in one call is removed once.
	if err := f.UninstallPacks(ctx, []*host.InstalledPack{a, a}); err != nil {
		t.Fatal(err)
	}
}

// TestPackSweep: an uninstall deletes the blobs no remaining pack names,
// signatures included, and keeps those another pack shares, temporary
// files and anything not named like a blob.
func TestPackSweep(t *testing.T) {
	f := newFixture(t, Options{})
	a := newTestPack("vendor.acme.a", "1.0.0", "", 500)
	a.blobs.Signature = []byte("ed25519 signature of a")
	b := newTestPack("vendor.acme.b", "1.0.0", "", 500)
	b.blobs.Archive = a.blobs.Archive // the same archive under another name
	b.blobs.Bundle, b.blobs.Provenance = nil, nil
	b.rec.Provenance = nil
	b.blobs.Signature = []byte("ed25519 signature of b")
	ra := mustInstall(t, f.Store, a)
	rb := mustInstall(t, f.Store, b)
	if ra.SignatureSHA256 != blobs.Digest(a.blobs.Signature) || rb.BundleSHA256 != "" || rb.Provenance != nil {
		t.Fatalf("records: %+v %+v", ra, rb)
	}
	dir := f.opts.PackBlobDir
	strays := []string{".host-tmp-abc-123", "README", strings.Repeat("A", 64)}
	for _, n := range strays {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A sweep that finds the signature unindexed deletes it: the reason for
	// the signature_sha256 column.
	if err := f.UninstallPacks(ctx, []*host.InstalledPack{rb}); err != nil {
		t.Fatal(err)
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	if sig, err := f.PackBlob(ctx, ra.SignatureSHA256); err != nil || !bytes.Equal(sig, a.blobs.Signature) {
		t.Fatalf("signature of the remaining pack: %v", err)
	}
	if _, err := f.PackBlob(ctx, rb.SignatureSHA256); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("signature of the uninstalled pack: %v, want it swept", err)
	}
	if err := f.UninstallPacks(ctx, []*host.InstalledPack{ra}); err != nil {
		t.Fatal(err)
	}
	if left := blobNames(t, f.Store); !slices.Equal(left, []string{".host-tmp-abc-123", strings.Repeat("A", 64), "README"}) {
		t.Fatalf("left after uninstalling everything: %v", left)
	}
}

func TestPackBlobAndIntegrity(t *testing.T) {
	f := newFixture(t, Options{})
	rec := mustInstall(t, f.Store, newTestPack("vendor.acme.a", "1.0.0", "", 500))
	outside := filepath.Join(filepath.Dir(f.opts.PackBlobDir), "secret")
	os.WriteFile(outside, []byte("x"), 0o600)
	for _, d := range []string{"", "../secret", "../../packrun.db", strings.ToUpper(rec.SHA256), rec.SHA256[:63], rec.SHA256 + "0",
		"/etc/passwd", rec.SHA256[:60] + "/../", strings.Repeat("g", 64)} {
		if _, err := f.PackBlob(ctx, d); !errors.Is(err, host.ErrValidation) {
			t.Errorf("PackBlob(%q): %v, want ErrValidation", d, err)
		}
	}
	if _, err := f.PackBlob(ctx, blobs.Digest([]byte("absent"))); !errors.Is(err, host.ErrNotFound) {
		t.Errorf("absent blob: %v, want ErrNotFound", err)
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	// A corrupted bundle.
	p := filepath.Join(f.opts.PackBlobDir, rec.BundleSHA256)
	good, _ := os.ReadFile(p)
	os.WriteFile(p, append(bytes.Clone(good), ' '), 0o600)
	if _, err := f.PackBlob(ctx, rec.BundleSHA256); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("corrupted blob read: %v", err)
	}
	if err := f.CheckPackIntegrity(ctx); err == nil || !strings.Contains(err.Error(), rec.Ref()) {
		t.Fatalf("integrity with a corrupted bundle: %v", err)
	}
	os.WriteFile(p, good, 0o600)
	// A missing provenance bundle.
	os.Remove(filepath.Join(f.opts.PackBlobDir, rec.ProvenanceSHA256))
	if err := f.CheckPackIntegrity(ctx); err == nil || !strings.Contains(err.Error(), rec.Ref()) {
		t.Fatalf("integrity with a missing provenance bundle: %v", err)
	}
}

func TestPackBlobDirApartFromArtifacts(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(ctx, filepath.Join(dir, "packrun.db"), Options{BlobDir: filepath.Join(dir, "b"), PackBlobDir: filepath.Join(dir, "b") + "/"})
	if err == nil {
		t.Fatal("opened with artifacts and pack blobs in one directory")
	}
	f := newFixture(t, Options{})
	if f.opts.BlobDir == f.opts.PackBlobDir {
		t.Fatal("defaults share a directory")
	}
	mustInstall(t, f.Store, newTestPack("vendor.acme.a", "1.0.0", "", 100))
	if entries, _ := os.ReadDir(f.opts.BlobDir); len(entries) != 0 {
		t.Fatalf("pack blobs in the artifact directory: %d", len(entries))
	}
}

// TestPacksGenerationAcrossStores: a second Store on the same database (as
// another process would open it) sees the generation move when the first
// installs or uninstalls, and lists what it installed.
func TestPacksGenerationAcrossStores(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	g0 := other.PacksGeneration()
	rec := mustInstall(t, f.Store, newTestPack("vendor.acme.a", "1.0.0", "", 100))
	g1 := other.PacksGeneration()
	if g1 == g0 {
		t.Fatal("install did not move the other store's generation")
	}
	if all := mustList(t, other); len(all) != 1 || all[0].SHA256 != rec.SHA256 {
		t.Fatalf("other store lists %v", refs(all))
	}
	same := newTestPack("vendor.acme.a", "1.0.0", "", 100)
	if _, already, err := other.InstallPack(ctx, same.rec, same.blobs); err != nil || !already {
		t.Fatalf("reinstall through the other store: %v already=%v", err, already)
	}
	if other.PacksGeneration() != g1 {
		t.Fatal("a no-op install moved the generation")
	}
	if err := other.UninstallPacks(ctx, []*host.InstalledPack{rec}); err != nil {
		t.Fatal(err)
	}
	if f.PacksGeneration() == g1 {
		t.Fatal("the other store's uninstall did not move the generation")
	}
}

// TestGenerationsFileGrows: a -memgen file of an older packrun (16 bytes:
// memory and routes) is extended to hold the packs generation, and the
// counters it held carry on.
func TestGenerationsFileGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "packrun.db")
	old := make([]byte, 16)
	binary.NativeEndian.PutUint64(old[0:], 1000)
	binary.NativeEndian.PutUint64(old[8:], 2000)
	if err := os.WriteFile(path+"-memgen", old, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if fi, err := os.Stat(path + "-memgen"); err != nil || fi.Size() != 24 {
		t.Fatalf("memgen file: %v %v, want 24 bytes", fi, err)
	}
	if m, r := s.gens.memory.load(), s.gens.routes.load(); m != 1001 || r != 2001 {
		t.Fatalf("memory %d, routes %d: want 1001 and 2001 (kept, bumped once)", m, r)
	}
	g := s.PacksGeneration()
	mustInstall(t, s, newTestPack("vendor.acme.a", "1.0.0", "", 100))
	if s.PacksGeneration() == g {
		t.Fatal("install did not move the generation")
	}
}

// registryMigrations is a copy of the migration set ("registry") with which
// packrun before the single store created its packs table in packrun.db,
// as homes written then have it.
var registryMigrations = []string{
	`CREATE TABLE packs (
		name TEXT NOT NULL,
		version TEXT NOT NULL,
		archive_sha256 TEXT NOT NULL,
		size INTEGER NOT NULL,
		manifest BLOB NOT NULL,
		bundle_sha256 TEXT,
		provenance_sha256 TEXT,
		signer TEXT NOT NULL,
		key_id TEXT NOT NULL,
		provenance TEXT,
		installed_at TEXT NOT NULL,
		PRIMARY KEY (name, version)
	)`,
}

// TestPacksOfAnOlderHome opens a packrun.db whose packs table packrun
// before the single store created, with a pack in it as that packrun
// stored it, and finds the pack intact; the old migration set then finds
// nothing to do.
func TestPacksOfAnOlderHome(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, "packrun.db")
	d, err := openDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := migrateDB(ctx, d, "registry", registryMigrations); err != nil {
		t.Fatal(err)
	}
	archive, bundle := []byte("an archive"), []byte("a bundle")
	blobDir := filepath.Join(home, "blobs", "sha256")
	os.MkdirAll(blobDir, 0o700)
	for _, b := range [][]byte{archive, bundle} {
		os.WriteFile(filepath.Join(blobDir, blobs.Digest(b)), b, 0o600)
	}
	// As packrun before the single store wrote it: provenance is
	// json.Marshal of an untagged struct, times RFC 3339.
	_, err = d.ExecContext(ctx, `INSERT INTO packs (name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signer, key_id, provenance, installed_at)
		VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?)`,
		"vendor.acme.old", "1.2.3", blobs.Digest(archive), len(archive), []byte(`{"name":"vendor.acme.old"}`), blobs.Digest(bundle),
		"key:old", "kid", `{"BuilderID":"https://ci.example/b@v1","BuildType":"bt","SourceDigest":"abcd","BuiltAt":"2025-06-01T12:00:00Z","Signer":"key:old"}`,
		"2025-07-01T10:11:12.345Z")
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := mustList(t, s)
	if len(all) != 1 {
		t.Fatalf("listed %v, want the old pack", refs(all))
	}
	p := all[0]
	wantProv := host.PackProvenance{BuilderID: "https://ci.example/b@v1", BuildType: "bt", SourceDigest: "abcd", BuiltAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), Signer: "key:old"}
	if p.Ref() != "vendor.acme.old@1.2.3" || p.SHA256 != blobs.Digest(archive) || p.Size != int64(len(archive)) || p.BundleSHA256 != blobs.Digest(bundle) ||
		p.ProvenanceSHA256 != "" || p.SignatureSHA256 != "" || p.Signer != "key:old" || p.KeyID != "kid" || string(p.Manifest) != `{"name":"vendor.acme.old"}` ||
		p.Provenance == nil || !p.Provenance.BuiltAt.Equal(wantProv.BuiltAt) || p.Provenance.BuilderID != wantProv.BuilderID ||
		p.Provenance.SourceDigest != "abcd" || p.Provenance.BuildType != "bt" || p.Provenance.Signer != "key:old" ||
		!p.InstalledAt.Equal(time.Date(2025, 7, 1, 10, 11, 12, 345e6, time.UTC)) {
		t.Fatalf("old pack read as %+v (provenance %+v)", p, p.Provenance)
	}
	if err := s.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	// A new pack beside it, with a signature; the old one's blobs survive
	// the sweep of uninstalling the new one.
	n := newTestPack("vendor.acme.new", "1.0.0", "", 100)
	n.blobs.Signature = []byte("sig")
	rec := mustInstall(t, s, n)
	if err := s.UninstallPacks(ctx, []*host.InstalledPack{rec}); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// The old migration set (which packrun before the single store ran at
	// every open) is a no-op now.
	d, err = openDB(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := migrateDB(ctx, d, "registry", registryMigrations); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryMigrationAfterHostStore: in a new home the host store
// creates the packs table; packrun before the single store, opening the
// home after it, must not try to create it again.
func TestRegistryMigrationAfterHostStore(t *testing.T) {
	f := newFixture(t, Options{})
	mustInstall(t, f.Store, newTestPack("vendor.acme.a", "1.0.0", "", 100))
	d, err := openDB(ctx, f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := migrateDB(ctx, d, "registry", registryMigrations); err != nil {
		t.Fatal(err)
	}
	// That packrun's insert, which knows no signature_sha256, still fits.
	if _, err := d.ExecContext(ctx, `INSERT INTO packs (name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signer, key_id, provenance, installed_at)
		VALUES ('vendor.acme.r', '1.0.0', ?, 1, x'7b7d', NULL, NULL, 'unsigned', '', NULL, '2025-01-01T00:00:00Z')`, blobs.Digest([]byte("r"))); err != nil {
		t.Fatal(err)
	}
	if got := refs(mustList(t, f.Store)); !slices.Equal(got, []string{"vendor.acme.a@1.0.0", "vendor.acme.r@1.0.0"}) {
		t.Fatalf("list: %v", got)
	}
}

// TestInstallSurvivesSweepBetweenBlobsAndRow: a sweep (by another store,
// as another process) that runs after an install wrote its blobs and before
// it records them deletes them as unreferenced; the install must put them
// back, under the write lock, before it commits.
func TestInstallSurvivesSweepBetweenBlobsAndRow(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	victim := mustInstall(t, other, newTestPack("vendor.acme.victim", "1.0.0", "", 100))
	p := newTestPack("vendor.acme.a", "1.0.0", "", 2000)
	p.blobs.Signature = []byte("sig")
	swept := false
	f.Store.beforeInstallTx = func() {
		if err := other.UninstallPacks(ctx, []*host.InstalledPack{victim}); err != nil {
			t.Error(err)
		}
		_, err := os.Stat(filepath.Join(f.opts.PackBlobDir, blobs.Digest(p.blobs.Archive)))
		swept = errors.Is(err, os.ErrNotExist)
	}
	rec := mustInstall(t, f.Store, p)
	if !swept {
		t.Fatal("the sweep did not delete the fresh blobs: the test does not test the race")
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatalf("after install: %v", err)
	}
	if got, err := other.PackBlob(ctx, rec.SignatureSHA256); err != nil || string(got) != "sig" {
		t.Fatalf("signature: %v", err)
	}
}

// TestInstallRacesUninstall installs packs through one store while another
// (as another process) installs and uninstalls other packs over and over;
// every pack installed must stay intact.
func TestInstallRacesUninstall(t *testing.T) {
	f := newFixture(t, Options{})
	other := f.another(t)
	const n = 40
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := newTestPack("vendor.acme.churn", "1.0."+strconv.Itoa(i), "", 1000)
			rec, _, err := other.InstallPack(ctx, p.rec, p.blobs)
			if err == nil {
				err = other.UninstallPacks(ctx, []*host.InstalledPack{rec})
			}
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var iwg sync.WaitGroup
	for w := 0; w < 4; w++ {
		iwg.Add(1)
		go func() {
			defer iwg.Done()
			for i := w; i < n; i += 4 {
				p := newTestPack("vendor.acme.keep", "1.0."+strconv.Itoa(i), "", 1000)
				if _, _, err := f.InstallPack(ctx, p.rec, p.blobs); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	iwg.Wait()
	close(stop)
	wg.Wait()
	if all := mustList(t, f.Store); len(all) != n {
		t.Fatalf("%d packs installed, want %d", len(all), n)
	}
	if err := f.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestInstallPackSurvivesKill kills a process that installs and uninstalls
// packs at random moments; after each kill the store must be consistent
// (every listed pack's blobs present and intact), and the installs must
// then complete.
func TestInstallPackSurvivesKill(t *testing.T) {
	if os.Getenv("PACKRUN_TEST_PACKS_CHILD") != "" {
		installPacksChild(t)
		return
	}
	path := filepath.Join(t.TempDir(), "packrun.db")
	const versions = 30
	run := func(kill time.Duration) error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInstallPackSurvivesKill$", "-test.count=1")
		cmd.Env = append(os.Environ(), "PACKRUN_TEST_PACKS_CHILD="+path, "PACKRUN_TEST_VERSIONS="+strconv.Itoa(versions))
		if kill > 0 {
			cmd.Env = append(cmd.Env, "PACKRUN_TEST_CHURN=1")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if kill > 0 {
			time.Sleep(kill)
			cmd.Process.Kill() // SIGKILL
		}
		return cmd.Wait()
	}
	check := func(when string) int {
		s, err := Open(ctx, path, Options{})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		defer s.Close()
		if err := s.CheckPackIntegrity(ctx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		return len(mustList(t, s))
	}
	for i := 0; i < 6; i++ {
		run(time.Duration(50+rand.IntN(300)) * time.Millisecond)
		t.Logf("after kill %d: %d of %d packs installed", i, check(fmt.Sprintf("after kill %d", i)), versions)
	}
	if err := run(0); err != nil {
		t.Fatalf("install after kills: %v", err)
	}
	if got := check("at the end"); got != versions {
		t.Fatalf("%d packs installed, want %d", got, versions)
	}
}

// installPacksChild installs vendor.acme.crash@1.0.0..N (what is there
// already is a no-op). With PACKRUN_TEST_CHURN it goes on until killed,
// uninstalling a random half of them and installing them again.
func installPacksChild(t *testing.T) {
	path := os.Getenv("PACKRUN_TEST_PACKS_CHILD")
	n, _ := strconv.Atoi(os.Getenv("PACKRUN_TEST_VERSIONS"))
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for {
		for v := 0; v < n; v++ {
			p := newTestPack("vendor.acme.crash", fmt.Sprintf("1.0.%d", v), "", 64<<10)
			if _, _, err := s.InstallPack(ctx, p.rec, p.blobs); err != nil {
				t.Fatal(err)
			}
		}
		if os.Getenv("PACKRUN_TEST_CHURN") == "" {
			return
		}
		var half []*host.InstalledPack
		for _, p := range mustList(t, s) {
			if rand.IntN(2) == 0 {
				half = append(half, p)
			}
		}
		if err := s.UninstallPacks(ctx, half); err != nil {
			t.Fatal(err)
		}
	}
}
