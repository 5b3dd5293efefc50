package storecore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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

// The pack-index rules of host.Packs, written once against Tx. Where the
// blobs live (files beside SQLite's database, a table of PostgreSQL's) and
// how a change of the installed set is serialised and announced is the
// driver's (PackTx).

// PackTx is a write transaction that can change the installed packs.
type PackTx interface {
	Tx
	// LockPacks is called before a change reads the installed set: the
	// changes of every node are serial under it (nothing under SQLite's
	// single writer).
	LockPacks(ctx context.Context) error
	// PutPackBlobs stores the blobs an install's row is about to name (nil
	// ones are absent).
	PutPackBlobs(ctx context.Context, data [][]byte) error
	// DropPackBlobs deletes, in the transaction, the blobs no remaining row
	// names, if the driver does it there (SQLite sweeps its files after).
	DropPackBlobs(ctx context.Context) error
	// PacksChanged is called once the installed set was changed.
	PacksChanged(ctx context.Context) error
}

// PackColumns are the index's columns, as ScanPack reads them.
const PackColumns = `name, version, archive_sha256, size, manifest, bundle_sha256, provenance_sha256, signature_sha256, signer, key_id, provenance, installed_at`

// ScanPack reads a packs row (PackColumns).
func ScanPack(row Row) (*host.InstalledPack, error) {
	var p host.InstalledPack
	var bundle, prov, sig, provJSON *string
	var at string
	var manifest []byte
	if err := row.Scan(&p.Name, &p.Version, &p.SHA256, &p.Size, &manifest, &bundle, &prov, &sig, &p.Signer, &p.KeyID, &provJSON, &at); err != nil {
		return nil, err
	}
	p.Manifest = manifest
	p.BundleSHA256, p.ProvenanceSHA256, p.SignatureSHA256 = deref(bundle), deref(prov), deref(sig)
	var err error
	if p.Provenance, err = DecodeProvenance(p.Ref(), provJSON); err != nil {
		return nil, err
	}
	p.InstalledAt, _ = time.Parse(time.RFC3339Nano, at)
	p.InstalledAt = p.InstalledAt.UTC()
	return &p, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// nullable is s, or NULL for "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// FindPack reads the row of name@version (ErrNoRows: none).
func FindPack(ctx context.Context, q Querier, name, version string) (*host.InstalledPack, error) {
	return ScanPack(q.QueryRow(ctx, `SELECT `+PackColumns+` FROM packs WHERE name = $1 AND version = $2`, name, version))
}

// ListPacks lists the installed packs, by name, newest version first.
func ListPacks(ctx context.Context, q Querier) ([]*host.InstalledPack, error) {
	rows, err := q.Query(ctx, `SELECT `+PackColumns+` FROM packs`)
	if err != nil {
		return nil, err
	}
	out, err := CollectRows(rows, ScanPack)
	if err != nil {
		return nil, err
	}
	SortPacks(out)
	return out, nil
}

// InstallPack stores inst (PackRecord's) and its blobs b, unless
// name@version is installed already: then it answers as SamePack does.
func InstallPack(ctx context.Context, tx PackTx, op string, inst *host.InstalledPack, b host.PackBlobs) (*host.InstalledPack, bool, error) {
	prov, err := EncodeProvenance(inst.Provenance)
	if err != nil {
		return nil, false, err
	}
	if err := tx.LockPacks(ctx); err != nil {
		return nil, false, err
	}
	cur, err := FindPack(ctx, tx, inst.Name, inst.Version)
	if err == nil {
		return SamePack(op, cur, inst)
	}
	if !errors.Is(err, ErrNoRows) {
		return nil, false, err
	}
	if err := tx.PutPackBlobs(ctx, [][]byte{b.Archive, b.Bundle, b.Provenance, b.Signature}); err != nil {
		return nil, false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO packs (`+PackColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		inst.Name, inst.Version, inst.SHA256, inst.Size, []byte(inst.Manifest),
		nullable(inst.BundleSHA256), nullable(inst.ProvenanceSHA256), nullable(inst.SignatureSHA256),
		inst.Signer, inst.KeyID, prov, inst.InstalledAt.Format(time.RFC3339Nano)); err != nil {
		return nil, false, err
	}
	return inst, false, tx.PacksChanged(ctx)
}

// UninstallPacks deletes the rows of todo (UninstallRefs'); if any is not
// installed, it deletes none and names them.
func UninstallPacks(ctx context.Context, tx PackTx, op string, todo []*host.InstalledPack) error {
	if err := tx.LockPacks(ctx); err != nil {
		return err
	}
	const match = `FROM packs WHERE name = $1 AND version = $2 AND ($3 = '' OR archive_sha256 = $3)`
	var missing []string
	for _, r := range todo {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) `+match, r.Name, r.Version, r.SHA256).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			missing = append(missing, r.Ref())
		}
	}
	if len(missing) > 0 {
		return host.Errorf(op, strings.Join(missing, ", "), host.ErrPackNotInstalled, "")
	}
	for _, r := range todo {
		if _, err := tx.Exec(ctx, `DELETE `+match, r.Name, r.Version, r.SHA256); err != nil {
			return err
		}
	}
	if err := tx.DropPackBlobs(ctx); err != nil {
		return err
	}
	return tx.PacksChanged(ctx)
}

// PackDigests are the digests of every blob an installed pack names.
func PackDigests(ctx context.Context, q Querier) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT archive_sha256, COALESCE(bundle_sha256, ''), COALESCE(provenance_sha256, ''), COALESCE(signature_sha256, '') FROM packs`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keep := map[string]bool{}
	for rows.Next() {
		var a, b, c, d string
		if err := rows.Scan(&a, &b, &c, &d); err != nil {
			return nil, err
		}
		keep[a], keep[b], keep[c], keep[d] = true, true, true, true
	}
	return keep, rows.Err()
}
