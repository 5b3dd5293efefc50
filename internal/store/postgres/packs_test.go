package postgres

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/host"
)

// testPack is a pack's record and blobs; the store verifies nothing, so
// any bytes do.
func testPack(name, version, salt string) (*host.InstalledPack, host.PackBlobs) {
	id := name + "@" + version + "/" + salt
	return &host.InstalledPack{Name: name, Version: version, Signer: "key:test", KeyID: "kid",
			Manifest: json.RawMessage(fmt.Sprintf(`{"name":%q,"version":%q}`, name, version))},
		host.PackBlobs{Archive: []byte("archive of " + id), Bundle: []byte(`{"bundle":"` + id + `"}`)}
}

// An install on one node moves every node's generation, and its blobs
// are read on every node; so does an uninstall.
func TestPacksGenerationAcrossNodes(t *testing.T) {
	ns := openNodes(t, 3, nil, Options{})
	a, b, c := ns[0], ns[1], ns[2]
	gb, gc := b.PacksGeneration(), c.PacksGeneration()
	if gb == 0 || gb != gc {
		t.Fatalf("generations %d and %d of one database", gb, gc)
	}
	rec, blobs := testPack("vendor.acme.hello", "1.0.0", "")
	inst, already, err := a.InstallPack(ctx, rec, blobs)
	if err != nil || already {
		t.Fatal(err, already)
	}
	if b.PacksGeneration() == gb || c.PacksGeneration() == gc {
		t.Fatal("an install on node a did not move the other nodes' generation")
	}
	if got, err := c.PackBlob(ctx, inst.SHA256); err != nil || string(got) != string(blobs.Archive) {
		t.Fatalf("node c reads the archive: %q %v", got, err)
	}
	if all, err := b.ListPacks(ctx); err != nil || len(all) != 1 || all[0].SHA256 != inst.SHA256 {
		t.Fatalf("node b lists %+v %v", all, err)
	}
	g := a.PacksGeneration()
	if err := b.UninstallPacks(ctx, []*host.InstalledPack{inst}); err != nil {
		t.Fatal(err)
	}
	if a.PacksGeneration() == g {
		t.Fatal("an uninstall on node b did not move node a's generation")
	}
	if _, err := c.PackBlob(ctx, inst.SHA256); !errorsIs(err, host.ErrNotFound) {
		t.Fatalf("an uninstalled pack's blob: %v", err)
	}
}

// Nodes installing the same pack at once: one installs it, the others
// find it installed; the generation moves once.
func TestPacksConcurrentInstall(t *testing.T) {
	ns := openNodes(t, 3, nil, Options{})
	g := ns[0].PacksGeneration()
	rec, blobs := testPack("vendor.acme.hello", "1.0.0", "")
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for _, s := range ns {
		wg.Go(func() {
			_, already, err := s.InstallPack(ctx, rec, blobs)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !already {
				fresh++
			}
		})
	}
	wg.Wait()
	if fresh != 1 || ns[1].PacksGeneration() != g+1 {
		t.Fatalf("%d fresh installs, generation %d → %d", fresh, g, ns[1].PacksGeneration())
	}
}

// Installs and uninstalls racing on several nodes, over blobs the packs
// share: an installed pack never names a missing blob, and no blob is left
// that no pack names.
func TestPacksInstallUninstallRace(t *testing.T) {
	ns := openNodes(t, 3, nil, Options{})
	var wg sync.WaitGroup
	for i, s := range ns {
		wg.Go(func() {
			for j := range 15 {
				// The packs share three archives with the other nodes'
				// packs: installs of one race with uninstalls of another
				// deleting the same blobs.
				rec, blobs := testPack(fmt.Sprintf("vendor.n%d.p%d", i, j), "1.0.0", "")
				blobs.Archive = []byte("a shared archive " + fmt.Sprint(j%3))
				inst, _, err := s.InstallPack(ctx, rec, blobs)
				if err != nil {
					t.Error(err)
					return
				}
				// Only this node uninstalls its pack: its archive is here.
				if _, err := s.PackBlob(ctx, inst.SHA256); err != nil {
					t.Errorf("%s installed, its archive: %v", inst.Ref(), err)
					return
				}
				if j < 12 {
					if err := s.UninstallPacks(ctx, []*host.InstalledPack{inst}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if err := ns[0].CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	var orphans int
	if err := ns[0].pool.QueryRow(ctx, `SELECT count(*) FROM pack_blobs b WHERE NOT EXISTS (SELECT 1 FROM packs p WHERE b.sha256 IN
		(p.archive_sha256, p.bundle_sha256, p.provenance_sha256, p.signature_sha256))`).Scan(&orphans); err != nil || orphans != 0 {
		t.Fatalf("%d blobs no pack names (%v)", orphans, err)
	}
}

// CheckPackIntegrity names the pack whose blob is missing or altered; a
// blob altered in the database is refused when read.
func TestCheckPackIntegrity(t *testing.T) {
	s := openNodes(t, 1, nil, Options{})[0]
	if err := s.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	rec, blobs := testPack("vendor.acme.hello", "1.0.0", "")
	inst, _, err := s.InstallPack(ctx, rec, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckPackIntegrity(ctx); err != nil {
		t.Fatal(err)
	}
	tamper(t, s, `UPDATE pack_blobs SET data = 'other bytes' WHERE sha256 = $1`, inst.BundleSHA256)
	if err := s.CheckPackIntegrity(ctx); err == nil || !strings.Contains(err.Error(), inst.Ref()) || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("an altered bundle: %v", err)
	}
	if _, err := s.PackBlob(ctx, inst.BundleSHA256); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Fatalf("an altered blob was read: %v", err)
	}
	tamper(t, s, `DELETE FROM pack_blobs WHERE sha256 = $1`, inst.BundleSHA256)
	if err := s.CheckPackIntegrity(ctx); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing bundle: %v", err)
	}
}
