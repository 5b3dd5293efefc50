package storemove

import (
	"context"
	"iter"
	"strings"

	"github.com/packrun/packrun/host"
)

// Op names a store migration in errors, wherever they arise.
const Op = "import sqlite store"

// Source is a store's content, read in one consistent snapshot: its
// tables with their columns and row counts, each table's rows in
// insertion order, the blobs its rows name and the head of its evidence
// chain. Every stored byte comes as it is (times, event data, attempt
// records, sealed secret values), so that the chain's hashes and the
// secret key's seals hold in the target as in the source.
type Source interface {
	// Tables lists the tables to copy in name order. Tables that are the
	// store's bookkeeping rather than data (its migrations, its locks) are
	// left out; a table the source holds only for an older packrun, with
	// rows in it, is refused naming what to do.
	Tables(ctx context.Context) ([]Table, error)
	// Rows yields each row of t in insertion order, its values in
	// t.Columns' order (the target may leave out columns it has no use
	// for), each nil, int64, float64, string or []byte; a read that fails
	// yields its error and ends. The caller may keep each row.
	Rows(ctx context.Context, t Table) iter.Seq2[[]any, error]
	// Blob returns the bytes a row names by sha256 digest, checked
	// against it: a missing blob is host.ErrNotFound, bytes that do not
	// match are host.ErrTampered, each naming the file.
	Blob(ctx context.Context, kind BlobKind, digest string) ([]byte, error)
	// Head is the evidence chain's last seq and hash (0 and the genesis
	// hash for an empty chain).
	Head(ctx context.Context) (seq int64, hash string, err error)
}

// Table is one table of a Source.
type Table struct {
	Name string
	// Columns are the columns Rows yields, in the source's order.
	Columns []string
	// Rows is how many rows the table has in the snapshot.
	Rows int64
}

// BlobKind is which blobs a digest names.
type BlobKind int

const (
	// PackBlob is an installed pack's archive, module or signature
	// bundle (a packs row's *_sha256 column).
	PackBlob BlobKind = iota
	// Artifact is an artifact's content (an artifacts row's sha256).
	Artifact
)

func (k BlobKind) String() string {
	if k == PackBlob {
		return "pack blob"
	}
	return "artifact"
}

// BlobRefs returns the blobs one row of table names, by kind: a pack's
// *_sha256 columns, an artifact's sha256.
func BlobRefs(table string, cols []string, row []any) (kind BlobKind, digests []string) {
	for i, c := range cols {
		d, _ := row[i].(string)
		switch {
		case d == "":
		case table == "packs" && strings.HasSuffix(c, "_sha256"):
			kind, digests = PackBlob, append(digests, d)
		case table == "artifacts" && c == "sha256":
			kind, digests = Artifact, append(digests, d)
		}
	}
	return kind, digests
}

// TableCount is how many rows one table has in the source and, after the
// copy, in the target (one row per table the source had).
type TableCount struct {
	Table  string `json:"table"`
	Source int64  `json:"source"`
	Target int64  `json:"target"`
}

// Report is what a migration copied and what it found.
type Report struct {
	Tables []TableCount `json:"tables"`
	// PackBlobs and Artifacts count the distinct blobs read from the
	// source into the target; Bytes is their size.
	PackBlobs int   `json:"pack_blobs"`
	Artifacts int   `json:"artifact_blobs"`
	Bytes     int64 `json:"bytes"`
	// Chain is the evidence chain as verified in the target, in the
	// copy's transaction before it committed.
	Chain *host.ChainReport `json:"chain"`
}
