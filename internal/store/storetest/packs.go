package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// Packs checks host.Packs: installing (digests and size filled in from
// the blobs, the caller's record untouched, the time of installation),
// the listing order, reading blobs back, an identical reinstall being a
// no-op, a different pack under the same name@version refused, records
// inconsistent with their blobs refused, uninstalling (all or nothing;
// blobs no pack names are gone, shared ones kept), and the generation
// moving exactly when the installed set changes. The store verifies
// nothing, so the fixtures are any bytes.
func Packs(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"InstallListUninstall", packsInstallListUninstall},
		{"Conflict", packsConflict},
		{"RefusesInconsistentRecords", packsRefusesInconsistentRecords},
		{"UninstallUnknown", packsUninstallUnknown},
		{"SharedBlobs", packsSharedBlobs},
	})
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// testPack is a pack as the Host would install it: its record and blobs.
type testPack struct {
	rec   *host.InstalledPack
	blobs host.PackBlobs
}

// newTestPack makes name@version whose archive derives from name,
// version and salt, with a bundle and a provenance bundle.
func newTestPack(name, version, salt string) testPack {
	id := name + "@" + version + "/" + salt
	return testPack{
		rec: &host.InstalledPack{
			Name: name, Version: version, Signer: "key:test", KeyID: "kid-" + name,
			Provenance: &host.PackProvenance{BuilderID: "https://ci.example/builder@v1", BuildType: "https://example/build",
				SourceDigest: strings.Repeat("ab", 32), BuiltAt: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), Signer: "key:test"},
			Manifest: json.RawMessage(fmt.Sprintf(`{"name":%q,"version":%q}`, name, version)),
		},
		blobs: host.PackBlobs{
			Archive:    []byte("archive of " + id + strings.Repeat("\x00\xff", 100)),
			Bundle:     []byte(`{"bundle":"` + id + `"}`),
			Provenance: []byte(`{"provenance":"` + id + `"}`),
		},
	}
}

func (f *fixture) install(p testPack) *host.InstalledPack {
	f.t.Helper()
	got, already, err := f.b.InstallPack(ctx, p.rec, p.blobs)
	if err != nil || already {
		f.t.Fatalf("install %s: %v (already %v)", p.rec.Ref(), err, already)
	}
	return got
}

func (f *fixture) packRefs() []string {
	f.t.Helper()
	all, err := f.b.ListPacks(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, p := range all {
		out = append(out, p.Ref())
	}
	return out
}

func packsInstallListUninstall(f *fixture) {
	t := f.t
	gen := f.b.PacksGeneration()
	var first testPack
	var firstRec *host.InstalledPack
	f.clock.Add(1234567 * time.Microsecond)
	for _, v := range []string{"1.0.0", "1.2.0", "2.0.0-rc.1", "10.0.0", "2.0.0"} {
		p := newTestPack("vendor.acme.hello", v, "")
		got := f.install(p)
		if got.SHA256 != digest(p.blobs.Archive) || got.Size != int64(len(p.blobs.Archive)) || got.BundleSHA256 != digest(p.blobs.Bundle) ||
			got.ProvenanceSHA256 != digest(p.blobs.Provenance) || got.SignatureSHA256 != "" || got.Name != p.rec.Name || got.Version != v {
			t.Fatalf("install %s: record %+v", v, got)
		}
		if p.rec.SHA256 != "" || !p.rec.InstalledAt.IsZero() {
			t.Fatalf("install modified the caller's record: %+v", p.rec)
		}
		if v == "1.0.0" {
			first, firstRec = p, got
		}
	}
	if f.b.PacksGeneration() == gen {
		t.Fatal("installs did not move the generation")
	}
	f.install(newTestPack("vendor.acme.bye", "0.1.0", ""))
	want := []string{"vendor.acme.bye@0.1.0", "vendor.acme.hello@10.0.0", "vendor.acme.hello@2.0.0", "vendor.acme.hello@2.0.0-rc.1",
		"vendor.acme.hello@1.2.0", "vendor.acme.hello@1.0.0"}
	if got := f.packRefs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("list:\n got %v\nwant %v", got, want)
	}
	all, _ := f.b.ListPacks(ctx)
	rec := all[len(all)-1]
	wantAt := Epoch.Add(1234 * time.Millisecond)
	if !rec.InstalledAt.Equal(wantAt) || rec.InstalledAt.Location() != time.UTC || !firstRec.InstalledAt.Equal(wantAt) {
		t.Fatalf("installed at %v, want %v (UTC, to the millisecond)", rec.InstalledAt, wantAt)
	}
	if rec.Signer != "key:test" || rec.KeyID != "kid-vendor.acme.hello" || !bytes.Equal(rec.Manifest, first.rec.Manifest) ||
		rec.Provenance == nil || *rec.Provenance != *first.rec.Provenance || rec.SHA256 != firstRec.SHA256 {
		t.Fatalf("listed record %+v (provenance %+v)", rec, rec.Provenance)
	}
	for d, want := range map[string][]byte{rec.SHA256: first.blobs.Archive, rec.BundleSHA256: first.blobs.Bundle, rec.ProvenanceSHA256: first.blobs.Provenance} {
		if got, err := f.b.PackBlob(ctx, d); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("pack blob %s: %v", d[:12], err)
		}
	}
	_, err := f.b.PackBlob(ctx, digest([]byte("nothing")))
	wantErr(t, err, host.ErrNotFound)
	for _, bad := range []string{"", "abc", strings.ToUpper(rec.SHA256), "../" + rec.SHA256[3:]} {
		if _, err := f.b.PackBlob(ctx, bad); err == nil {
			t.Fatalf("PackBlob(%q) read something", bad)
		}
	}

	// The identical archive again, with other bundles: a no-op that
	// returns the first record and keeps its bundles.
	gen = f.b.PacksGeneration()
	again := newTestPack("vendor.acme.hello", "1.0.0", "")
	again.blobs.Bundle = []byte(`{"bundle":"signed again"}`)
	f.clock.Add(time.Hour)
	got, already, err := f.b.InstallPack(ctx, again.rec, again.blobs)
	if err != nil || !already || got.BundleSHA256 != rec.BundleSHA256 || !got.InstalledAt.Equal(rec.InstalledAt) {
		t.Fatalf("reinstall: %+v already=%v %v", got, already, err)
	}
	if f.b.PacksGeneration() != gen {
		t.Fatal("a reinstall that changed nothing moved the generation")
	}
	if _, err := f.b.PackBlob(ctx, digest(again.blobs.Bundle)); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("a reinstall stored its bundle: %v", err)
	}

	// Uninstall 1.x as listed records, then the rest by name@version.
	var ones, rest []*host.InstalledPack
	for _, p := range all {
		if p.Name == "vendor.acme.hello" && strings.HasPrefix(p.Version, "1.") {
			ones = append(ones, p)
		} else {
			rest = append(rest, &host.InstalledPack{Name: p.Name, Version: p.Version})
		}
	}
	if err := f.b.UninstallPacks(ctx, ones); err != nil {
		t.Fatal(err)
	}
	if f.b.PacksGeneration() == gen {
		t.Fatal("an uninstall did not move the generation")
	}
	if got := f.packRefs(); len(got) != 4 || strings.Contains(strings.Join(got, " "), "@1.") {
		t.Fatalf("after uninstalling 1.x: %v", got)
	}
	for _, d := range []string{rec.SHA256, rec.BundleSHA256, rec.ProvenanceSHA256} {
		if _, err := f.b.PackBlob(ctx, d); !errors.Is(err, host.ErrNotFound) {
			t.Fatalf("blob of an uninstalled pack: %v, want it gone", err)
		}
	}
	if err := f.b.UninstallPacks(ctx, rest); err != nil {
		t.Fatal(err)
	}
	if got := f.packRefs(); len(got) != 0 {
		t.Fatalf("left: %v", got)
	}
	gen = f.b.PacksGeneration()
	if err := f.b.UninstallPacks(ctx, nil); err != nil || f.b.PacksGeneration() != gen {
		t.Fatalf("uninstall nothing: %v", err)
	}
}

func packsConflict(f *fixture) {
	t := f.t
	installed := f.install(newTestPack("vendor.acme.hello", "1.0.0", ""))
	gen := f.b.PacksGeneration()
	other := newTestPack("vendor.acme.hello", "1.0.0", "different")
	_, already, err := f.b.InstallPack(ctx, other.rec, other.blobs)
	if !errors.Is(err, host.ErrPackConflict) || already {
		t.Fatalf("err = %v (already %v), want ErrPackConflict", err, already)
	}
	all, _ := f.b.ListPacks(ctx)
	if len(all) != 1 || all[0].SHA256 != installed.SHA256 {
		t.Fatalf("the conflict changed the index: %+v", all)
	}
	if _, err := f.b.PackBlob(ctx, digest(other.blobs.Archive)); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("the refused archive was kept: %v", err)
	}
	if f.b.PacksGeneration() != gen {
		t.Fatal("a refused install moved the generation")
	}
}

func packsRefusesInconsistentRecords(f *fixture) {
	t := f.t
	p := newTestPack("vendor.acme.hello", "1.0.0", "")
	other := digest([]byte("other"))
	for name, mod := range map[string]func(*host.InstalledPack, *host.PackBlobs){
		"nil archive":            func(_ *host.InstalledPack, b *host.PackBlobs) { b.Archive = nil },
		"no name":                func(r *host.InstalledPack, _ *host.PackBlobs) { r.Name = "" },
		"no version":             func(r *host.InstalledPack, _ *host.PackBlobs) { r.Version = "" },
		"no manifest":            func(r *host.InstalledPack, _ *host.PackBlobs) { r.Manifest = nil },
		"archive digest differs": func(r *host.InstalledPack, _ *host.PackBlobs) { r.SHA256 = other },
		"size differs":           func(r *host.InstalledPack, _ *host.PackBlobs) { r.Size = 99 },
		"bundle digest differs":  func(r *host.InstalledPack, _ *host.PackBlobs) { r.BundleSHA256 = other },
		"bundle named, not given": func(r *host.InstalledPack, b *host.PackBlobs) {
			r.BundleSHA256, b.Bundle = digest(b.Bundle), nil
		},
		"signature named, not given": func(r *host.InstalledPack, _ *host.PackBlobs) { r.SignatureSHA256 = other },
	} {
		rec, b := *p.rec, p.blobs
		mod(&rec, &b)
		if _, _, err := f.b.InstallPack(ctx, &rec, b); !errors.Is(err, host.ErrValidation) {
			t.Fatalf("%s: err = %v, want ErrValidation", name, err)
		}
	}
	if _, _, err := f.b.InstallPack(ctx, nil, p.blobs); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("nil record: %v", err)
	}
	if got := f.packRefs(); len(got) != 0 {
		t.Fatalf("refused installs stored %v", got)
	}
	// Digests and size the caller fills in correctly, its own time of
	// installation and a signature are taken.
	rec := *p.rec
	rec.SHA256, rec.Size = digest(p.blobs.Archive), int64(len(p.blobs.Archive))
	rec.InstalledAt = time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600))
	b := p.blobs
	b.Signature = []byte("ed25519 signature")
	got := f.install(testPack{&rec, b})
	if !got.InstalledAt.Equal(rec.InstalledAt) || got.InstalledAt.Location() != time.UTC || got.SignatureSHA256 != digest(b.Signature) {
		t.Fatalf("installed %+v", got)
	}
	if l, _ := f.b.ListPacks(ctx); !l[0].InstalledAt.Equal(rec.InstalledAt) || l[0].SignatureSHA256 != got.SignatureSHA256 {
		t.Fatalf("listed %+v", l[0])
	}
	if sig, err := f.b.PackBlob(ctx, got.SignatureSHA256); err != nil || string(sig) != "ed25519 signature" {
		t.Fatalf("signature blob %q %v", sig, err)
	}
}

func packsUninstallUnknown(f *fixture) {
	t := f.t
	a := f.install(newTestPack("vendor.acme.a", "1.0.0", ""))
	gen := f.b.PacksGeneration()
	for name, rs := range map[string][]*host.InstalledPack{
		"one unknown of two": {a, {Name: "vendor.acme.b", Version: "1.0.0"}},
		"unknown version":    {{Name: "vendor.acme.a", Version: "1.0.1"}},
		"another archive":    {{Name: "vendor.acme.a", Version: "1.0.0", SHA256: digest([]byte("x"))}},
		"empty ref":          {{}},
	} {
		if err := f.b.UninstallPacks(ctx, rs); !errors.Is(err, host.ErrPackNotInstalled) {
			t.Fatalf("%s: err = %v, want ErrPackNotInstalled", name, err)
		}
	}
	if err := f.b.UninstallPacks(ctx, []*host.InstalledPack{a, nil}); !errors.Is(err, host.ErrValidation) {
		t.Fatalf("a nil ref: %v, want ErrValidation", err)
	}
	if got := f.packRefs(); len(got) != 1 {
		t.Fatalf("a refused uninstall removed packs: %v", got)
	}
	if _, err := f.b.PackBlob(ctx, a.SHA256); err != nil {
		t.Fatalf("a refused uninstall removed blobs: %v", err)
	}
	if f.b.PacksGeneration() != gen {
		t.Fatal("a refused uninstall moved the generation")
	}
	// The same pack twice in one call is removed once.
	if err := f.b.UninstallPacks(ctx, []*host.InstalledPack{a, a}); err != nil {
		t.Fatal(err)
	}
	if got := f.packRefs(); len(got) != 0 {
		t.Fatalf("left: %v", got)
	}
}

// An uninstall keeps the blobs another installed pack names.
func packsSharedBlobs(f *fixture) {
	t := f.t
	a := newTestPack("vendor.acme.a", "1.0.0", "")
	b := newTestPack("vendor.acme.b", "1.0.0", "")
	b.blobs.Archive, b.blobs.Bundle = a.blobs.Archive, a.blobs.Bundle // the same archive and bundle under another name
	ra, rb := f.install(a), f.install(b)
	if ra.SHA256 != rb.SHA256 || ra.ProvenanceSHA256 == rb.ProvenanceSHA256 {
		t.Fatalf("records %+v %+v", ra, rb)
	}
	if err := f.b.UninstallPacks(ctx, []*host.InstalledPack{ra}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rb.SHA256, rb.BundleSHA256, rb.ProvenanceSHA256} {
		if _, err := f.b.PackBlob(ctx, d); err != nil {
			t.Fatalf("a blob the remaining pack names: %v", err)
		}
	}
	if _, err := f.b.PackBlob(ctx, ra.ProvenanceSHA256); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("the uninstalled pack's own blob: %v", err)
	}
}
