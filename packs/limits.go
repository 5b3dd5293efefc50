package packs

// MaxManifestBytes is the largest pack.json accepted, checked before parsing.
const MaxManifestBytes = 1 << 20

// Limits bound what Read accepts from untrusted bytes, and what Pack
// produces. Zero or negative fields mean "use the default".
type Limits struct {
	// ArchiveBytes caps the compressed archive.
	ArchiveBytes int64
	// TotalBytes caps the decompressed stream (tar headers and content).
	TotalBytes int64
	// EntryBytes caps one file.
	EntryBytes int64
	// ManifestBytes caps pack.json; it is never above MaxManifestBytes.
	ManifestBytes int64
	// Entries caps the number of tar entries, directories included.
	Entries int
	// Ratio caps how far the content may expand: past the first RatioSlack
	// bytes, the decompressed stream may be at most Ratio times the
	// compressed bytes read so far. It stops a gzip bomb after a few MiB
	// instead of at TotalBytes (a 1 MB archive of zeros expands to 1 GB).
	Ratio int64
}

// RatioSlack is what the decompressed stream may hold whatever the
// compression ratio: small packs (a manifest, tar headers) compress far
// better than modules do.
const RatioSlack = 4 << 20

// DefaultLimits returns the limits for every zero field of a Limits.
func DefaultLimits() Limits {
	return Limits{
		ArchiveBytes:  256 << 20,
		TotalBytes:    512 << 20,
		EntryBytes:    256 << 20,
		ManifestBytes: MaxManifestBytes,
		Entries:       10000,
		Ratio:         100,
	}
}

// orDefault fills unset fields from DefaultLimits() and caps ManifestBytes.
func (l Limits) orDefault() Limits {
	if l.ArchiveBytes <= 0 {
		l.ArchiveBytes = DefaultLimits().ArchiveBytes
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultLimits().TotalBytes
	}
	if l.EntryBytes <= 0 {
		l.EntryBytes = DefaultLimits().EntryBytes
	}
	if l.ManifestBytes <= 0 {
		l.ManifestBytes = DefaultLimits().ManifestBytes
	}
	if l.ManifestBytes <= 0 || l.ManifestBytes > MaxManifestBytes {
		l.ManifestBytes = MaxManifestBytes
	}
	if l.Entries <= 0 {
		l.Entries = DefaultLimits().Entries
	}
	if l.Ratio <= 0 {
		l.Ratio = DefaultLimits().Ratio
	}
	return l
}
