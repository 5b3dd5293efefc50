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
}

// DefaultLimits are the limits for every zero field of a Limits.
var DefaultLimits = Limits{
	ArchiveBytes:  256 << 20,
	TotalBytes:    512 << 20,
	EntryBytes:    256 << 20,
	ManifestBytes: MaxManifestBytes,
	Entries:       10000,
}

// orDefault fills unset fields from DefaultLimits and caps ManifestBytes.
func (l Limits) orDefault() Limits {
	if l.ArchiveBytes <= 0 {
		l.ArchiveBytes = DefaultLimits.ArchiveBytes
	}
	if l.TotalBytes <= 0 {
		l.TotalBytes = DefaultLimits.TotalBytes
	}
	if l.EntryBytes <= 0 {
		l.EntryBytes = DefaultLimits.EntryBytes
	}
	if l.ManifestBytes <= 0 {
		l.ManifestBytes = DefaultLimits.ManifestBytes
	}
	if l.ManifestBytes <= 0 || l.ManifestBytes > MaxManifestBytes {
		l.ManifestBytes = MaxManifestBytes
	}
	if l.Entries <= 0 {
		l.Entries = DefaultLimits.Entries
	}
	return l
}
