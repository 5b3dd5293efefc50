package host

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// ErrPackNotInstalled is returned (wrapped) when no installed pack matches
// a name or reference.
var ErrPackNotInstalled = errors.New("not installed")

// ErrPackConflict is returned (wrapped) when a different pack is already
// installed under the same name@version.
var ErrPackConflict = errors.New("a different pack is installed under this name and version")

// InstalledPack is one installed pack: its index row. The archive and its
// signatures are blobs named by their sha256.
type InstalledPack struct {
	Name             string          `json:"name"`
	Version          string          `json:"version"`
	SHA256           string          `json:"sha256"`
	Size             int64           `json:"size"`
	Signer           string          `json:"signer"`
	KeyID            string          `json:"key_id,omitempty"`
	Provenance       *PackProvenance `json:"provenance,omitempty"`
	InstalledAt      time.Time       `json:"installed_at"`
	BundleSHA256     string          `json:"bundle_sha256,omitempty"`
	ProvenanceSHA256 string          `json:"provenance_sha256,omitempty"`
	SignatureSHA256  string          `json:"signature_sha256,omitempty"` // PackBlobs.Signature
	// Manifest is the pack.json the archive holds, byte for byte.
	Manifest json.RawMessage `json:"manifest"`
}

// Ref is Name@Version.
func (p *InstalledPack) Ref() string { return p.Name + "@" + p.Version }

// PackProvenance is the verified SLSA provenance of an installed pack.
type PackProvenance struct {
	BuilderID    string    `json:"builder_id"`
	BuildType    string    `json:"build_type,omitempty"`
	SourceDigest string    `json:"source_digest,omitempty"`
	BuiltAt      time.Time `json:"built_at,omitzero"`
	Signer       string    `json:"signer,omitempty"`
}

// PackBlobs are the bytes stored with an installed pack, exactly as they
// were verified. Nil members are absent.
type PackBlobs struct {
	Archive    []byte
	Bundle     []byte // Sigstore bundle over the archive
	Provenance []byte // provenance bundle
	Signature  []byte // detached Ed25519 signature of an openwop registry pack
}

// Packs is the installed-pack index and the pack blobs. It stores what it
// is given: verification, reference resolution and manifest decoding are
// the Host's.
type Packs interface {
	// InstallPack stores a verified pack: every blob durably first, then
	// the index row, in one transaction, so a crash leaves either the old
	// state or the new one (plus, at worst, unreferenced blobs). When the
	// identical pack (same archive digest) is installed already, it returns
	// that record and already = true and changes nothing; a different pack
	// under the same name@version fails with ErrPackConflict.
	//
	// The blob digests and Size of the record are the store's to fill in
	// from b (b.Archive is required); one the caller sets must match.
	// InstalledAt, when zero, is set to now (UTC, to the millisecond). p
	// itself is not modified.
	InstallPack(ctx context.Context, p *InstalledPack, b PackBlobs) (installed *InstalledPack, already bool, err error)
	// ListPacks returns every installed pack, by name, newest version
	// first (SemVer order).
	ListPacks(ctx context.Context) ([]*InstalledPack, error)
	// UninstallPacks removes the listed name@version rows in one
	// transaction and then deletes the blobs no installed pack refers to.
	// A ref with SHA256 set removes that pack only. If any ref is not
	// installed, nothing is removed and the error matches
	// ErrPackNotInstalled.
	UninstallPacks(ctx context.Context, refs []*InstalledPack) error
	// PackBlob reads a blob stored with a pack, checking it against its
	// digest (64 lowercase hex digits; anything else is refused).
	PackBlob(ctx context.Context, sha256 string) ([]byte, error)
	// PacksGeneration changes (in every process that opens the store)
	// whenever a pack is installed or uninstalled: a reader holding an
	// index of installed packs rebuilds it when the value moves.
	PacksGeneration() uint64
}
