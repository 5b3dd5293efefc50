package storecore

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
)

// The rules of host.Packs every backend applies: what an install stores,
// when it is a no-op or a conflict, the listing order, and the encoding of
// the provenance column.

// PackRecord is the row InstallPack stores for p and b (errors under op):
// a copy of p with the digests and size of b and, when p has none, the
// installation time now (to the millisecond), in UTC.
func PackRecord(op string, p *host.InstalledPack, b host.PackBlobs, now time.Time) (*host.InstalledPack, error) {
	if p == nil {
		return nil, host.Invalid(op, "pack", "is missing")
	}
	inst := *p
	switch {
	case inst.Name == "":
		return nil, host.Invalid(op, "name", "is empty")
	case inst.Version == "":
		return nil, host.Invalid(op, "version", "is empty")
	case len(b.Archive) == 0:
		return nil, host.Invalid(op, "archive", "is empty")
	case len(inst.Manifest) == 0:
		return nil, host.Invalid(op, "manifest", "is empty")
	}
	for _, f := range []struct {
		name   string
		digest *string
		data   []byte
	}{
		{"sha256", &inst.SHA256, b.Archive},
		{"bundle_sha256", &inst.BundleSHA256, b.Bundle},
		{"provenance_sha256", &inst.ProvenanceSHA256, b.Provenance},
		{"signature_sha256", &inst.SignatureSHA256, b.Signature},
	} {
		if f.data == nil {
			if *f.digest != "" {
				return nil, host.Invalid(op, f.name, "names a blob that is not given")
			}
			continue
		}
		d := blobs.Digest(f.data)
		if *f.digest != "" && *f.digest != d {
			return nil, host.Invalid(op, f.name, "is %s, but the blob given is %s", ShortDigest(*f.digest), ShortDigest(d))
		}
		*f.digest = d
	}
	if inst.Size == 0 {
		inst.Size = int64(len(b.Archive))
	} else if inst.Size != int64(len(b.Archive)) {
		return nil, host.Invalid(op, "size", "is %d, but the archive is %d bytes", inst.Size, len(b.Archive))
	}
	if inst.InstalledAt.IsZero() {
		inst.InstalledAt = now.Truncate(time.Millisecond)
	}
	inst.InstalledAt = inst.InstalledAt.UTC()
	if inst.Provenance != nil {
		pv := *inst.Provenance
		inst.Provenance = &pv
	}
	return &inst, nil
}

// SamePack answers an install of inst over cur, installed under the same
// name@version: the identical pack (same archive) is installed already;
// another is a conflict.
func SamePack(op string, cur, inst *host.InstalledPack) (*host.InstalledPack, bool, error) {
	if cur.SHA256 == inst.SHA256 {
		return cur, true, nil
	}
	return nil, false, &host.Error{Op: op, Subject: inst.Ref(),
		Err: fmt.Errorf("%w (installed %s, this one %s)", host.ErrPackConflict, ShortDigest(cur.SHA256), ShortDigest(inst.SHA256))}
}

// SortPacks orders packs as ListPacks lists them: by name, newest version
// first.
func SortPacks(ps []*host.InstalledPack) {
	slices.SortFunc(ps, func(a, b *host.InstalledPack) int {
		if c := cmp.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return CompareVersions(b.Version, a.Version) // newest first
	})
}

// CompareVersions orders SemVer versions by precedence; when either is not
// a strict SemVer version, it falls back to string order.
func CompareVersions(a, b string) int {
	va, ea := semver.StrictNewVersion(a)
	vb, eb := semver.StrictNewVersion(b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	if c := va.Compare(vb); c != 0 {
		return c
	}
	return strings.Compare(a, b) // equal precedence (build metadata): still a total order
}

// storedProvenance is the encoding of the provenance column, which packrun
// defined before the single store (json.Marshal of registry.Provenance,
// untagged): existing rows hold it.
type storedProvenance struct {
	BuilderID    string
	BuildType    string
	SourceDigest string
	BuiltAt      time.Time
	Signer       string
}

// EncodeProvenance is the provenance column's value for p (nil: NULL).
func EncodeProvenance(p *host.PackProvenance) (*string, error) {
	if p == nil {
		return nil, nil
	}
	b, err := json.Marshal(storedProvenance{BuilderID: p.BuilderID, BuildType: p.BuildType, SourceDigest: p.SourceDigest, BuiltAt: p.BuiltAt, Signer: p.Signer})
	if err != nil {
		return nil, err
	}
	v := string(b)
	return &v, nil
}

// DecodeProvenance reads the provenance column of pack ref (nil: NULL).
func DecodeProvenance(ref string, v *string) (*host.PackProvenance, error) {
	if v == nil {
		return nil, nil
	}
	var sp storedProvenance
	if err := json.Unmarshal([]byte(*v), &sp); err != nil {
		return nil, fmt.Errorf("index entry %s: provenance: %w", ref, err)
	}
	return &host.PackProvenance{BuilderID: sp.BuilderID, BuildType: sp.BuildType, SourceDigest: sp.SourceDigest, BuiltAt: sp.BuiltAt, Signer: sp.Signer}, nil
}

// IsDigest reports 64 lowercase hex digits, the name of a blob.
func IsDigest(d string) bool {
	return len(d) == 64 && strings.Trim(d, "0123456789abcdef") == ""
}

// ShortDigest is the first 12 digits of a digest, for messages.
func ShortDigest(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

// UninstallRefs validates the refs of an uninstall (errors under op) and
// returns them without repeats (the same name@version and archive digest).
func UninstallRefs(op string, refs []*host.InstalledPack) ([]*host.InstalledPack, error) {
	seen := map[string]bool{}
	var todo []*host.InstalledPack
	for _, r := range refs {
		if r == nil {
			return nil, host.Invalid(op, "refs", "holds a nil pack")
		}
		if k := r.Ref() + "\x00" + r.SHA256; !seen[k] {
			seen[k] = true
			todo = append(todo, r)
		}
	}
	return todo, nil
}
