package storecore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// The evidence log (issue 33) is a Merkle tree over the evidence chain:
// leaf i is the chain entry of seq i+1, its entry bytes the 32 bytes of
// the entry's chain hash (LogEntry). Writers append to the chain as
// before; the sequencer (IntegrateLog), run by each driver in the
// background, integrates what they committed into the tree in batches
// and signs a checkpoint for every batch. See RATIONALE.md, "Why a
// sequencer and not the appender integrates".

// LogBatch is how many entries one IntegrateLog call takes at most when
// a driver integrates a backlog (a home's chain from before the log).
const LogBatch = 10000

// LogEntry is the log entry of a chain entry: its chain hash (64 hex
// digits, the hash column of runtime_events or attempt_records) as 32
// bytes.
func LogEntry(seq int64, hash string) ([]byte, error) {
	b, err := hex.DecodeString(hash)
	if err != nil || len(b) != tlog.HashSize {
		return nil, fmt.Errorf("evidence log: chain entry %d: its hash %.16q is not a hex SHA-256", seq, hash)
	}
	return b, nil
}

// LogState is the log row: the integrated size, its root and the newest
// checkpoint note.
type LogState struct {
	Size uint64
	Root []byte
	Note string
	At   time.Time
	// Key is the verifier key of the log key the log was given
	// (LogKeyOf), "" while it is signed by a home's host key.
	Key string
}

// TileStore is the evidence_tiles table seen through q as a
// tlog.TileReader.
type TileStore struct{ Q Querier }

// ReadTiles implements tlog.TileReader.
func (t TileStore) ReadTiles(ctx context.Context, ids []tlog.TileID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		var data []byte
		err := t.Q.QueryRow(ctx, `SELECT data FROM evidence_tiles WHERE level = $1 AND idx = $2`, int64(id.Level), int64(id.Index)).Scan(&data)
		if err == ErrNoRows {
			return nil, fmt.Errorf("tile %s: not stored", id.Path())
		}
		if err != nil {
			return nil, fmt.Errorf("tile %s: %w", id.Path(), err)
		}
		if len(data) < int(id.Width)*tlog.HashSize {
			return nil, fmt.Errorf("tile %s: %d bytes stored, want %d", id.Path(), len(data), int(id.Width)*tlog.HashSize)
		}
		out[i] = data[:int(id.Width)*tlog.HashSize]
	}
	return out, nil
}

func readLog(ctx context.Context, q Querier, lock string) (*LogState, error) {
	var (
		size int64
		at   string
		st   LogState
	)
	if err := q.QueryRow(ctx, `SELECT size, root, note, integrated_at, log_key FROM evidence_log WHERE id = 1`+lock).Scan(&size, &st.Root, &st.Note, &at, &st.Key); err != nil {
		return nil, fmt.Errorf("read the evidence log: %w", err)
	}
	st.Size = uint64(size)
	if st.Size == 0 {
		st.Root = tlog.EmptyRoot()
	}
	st.At, _ = host.ParseTime(at)
	return &st, nil
}

// IntegrateLog is the sequencer: it locks the log row (Dialect.LockRows:
// on PostgreSQL the row lock is the fence, so two nodes never integrate
// at once; SQLite's single writer runs one transaction at a time), reads
// up to max chain entries after the integrated size in seq order (from
// both chain tables, stopping at a gap), appends them to the tree, writes
// the tiles, the new size and root, and the checkpoint sign returns
// (given the size and root; it sets the origin; nil: an unsigned
// checkpoint, note ""). key is the verifier key of the log key the
// store was given (Options.LogSigner; "" when it signs with its host
// key): the first checkpoint signed with one records it, and from then
// on a store given another key is refused (ErrLogKey) and a store given
// none integrates nothing, leaving the log to the stores that hold it.
// known, when not nil, holds entries the store placed itself: the run
// of them from the log's size on is integrated without reading it back,
// and only the entries after it are read from the tables (entries
// another process or node placed, or placed before the store was opened;
// usually none on SQLite and on a node alone). What is integrated is let
// go of. It returns how many entries it integrated and the log's size
// after.
func IntegrateLog(ctx context.Context, tx Tx, sign func(tlog.Checkpoint) ([]byte, error), key string, now time.Time, max int, known *KnownEntries) (int, uint64, error) {
	st, err := readLog(ctx, tx, tx.Dialect().LockRows)
	if err != nil {
		return 0, 0, err
	}
	if st.Key != "" {
		if key == "" {
			return 0, st.Size, nil
		}
		if err := checkLogKey(st.Key, key); err != nil {
			return 0, 0, err
		}
	}
	var hashes []string
	if known != nil {
		hashes = known.From(int64(st.Size)+1, max)
	}
	if len(hashes) < max {
		more, err := readLogEntries(ctx, tx, st.Size+uint64(len(hashes)), max-len(hashes))
		if err != nil {
			return 0, 0, err
		}
		hashes = append(hashes, more...)
	}
	leaves := make([][]byte, len(hashes))
	for i, hash := range hashes {
		entry, err := LogEntry(int64(st.Size)+1+int64(i), hash)
		if err != nil {
			return 0, 0, err
		}
		leaves[i] = tlog.LeafHash(entry)
	}
	if len(leaves) == 0 {
		return 0, st.Size, nil
	}
	in, err := tlog.Integrate(ctx, TileStore{tx}, st.Size, leaves)
	if err != nil {
		return 0, 0, fmt.Errorf("evidence log: %w", err)
	}
	for _, t := range in.Tiles {
		if _, err := tx.Exec(ctx, `INSERT INTO evidence_tiles (level, idx, width, data) VALUES ($1, $2, $3, $4)
			ON CONFLICT (level, idx) DO UPDATE SET width = excluded.width, data = excluded.data
			WHERE excluded.width > evidence_tiles.width`, int64(t.Level), int64(t.Index), int64(t.Width), t.Data); err != nil {
			return 0, 0, fmt.Errorf("write tile %s: %w", t.Path(), err)
		}
	}
	var note []byte
	if sign != nil {
		if note, err = sign(tlog.Checkpoint{Size: in.Size, Root: in.Root}); err != nil {
			return 0, 0, fmt.Errorf("sign the evidence log checkpoint: %w", err)
		}
	}
	at := host.FormatTime(now)
	if sign == nil {
		key = st.Key // an unsigned checkpoint records no key
	} else if st.Key != "" {
		key = st.Key
	}
	if _, err := tx.Exec(ctx, `UPDATE evidence_log SET size = $1, root = $2, note = $3, integrated_at = $4, log_key = $5 WHERE id = 1`,
		int64(in.Size), in.Root, string(note), at, key); err != nil {
		return 0, 0, fmt.Errorf("write the evidence log: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO evidence_checkpoints (size, note, at) VALUES ($1, $2, $3)`, int64(in.Size), string(note), at); err != nil {
		return 0, 0, fmt.Errorf("write the evidence log checkpoint: %w", err)
	}
	if known != nil {
		known.Drop(int64(in.Size)) // at worst, if this transaction rolls back, read again
	}
	return len(leaves), in.Size, nil
}

// readLogEntries reads the hashes of up to max chain entries after size,
// in seq order from both chain tables, stopping at a gap (a write not
// committed yet, or never).
func readLogEntries(ctx context.Context, q Querier, size uint64, max int) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT seq, hash FROM (
		SELECT seq, hash FROM runtime_events WHERE seq > $1
		UNION ALL SELECT seq, hash FROM attempt_records WHERE seq > $1) e
		ORDER BY seq LIMIT $2`, int64(size), max)
	if err != nil {
		return nil, fmt.Errorf("read the chain entries to integrate: %w", err)
	}
	defer rows.Close()
	var hashes []string
	next := int64(size) + 1
	for rows.Next() {
		var (
			seq  int64
			hash string
		)
		if err := rows.Scan(&seq, &hash); err != nil {
			return nil, err
		}
		if seq != next {
			break
		}
		hashes = append(hashes, hash)
		next++
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the chain entries to integrate: %w", err)
	}
	return hashes, nil
}

// ErrLogKey: a store was given a log key other than the one its log's
// checkpoints are signed with (every node of a cluster must be given
// the same one).
var ErrLogKey = errors.New("the evidence log is signed with another log key")

func checkLogKey(recorded, key string) error {
	if key != recorded {
		return fmt.Errorf("%w: its checkpoints are signed by %s, this store was given %s (give every node of the cluster the same log key)", ErrLogKey, recorded, key)
	}
	return nil
}

// LogKeyOf reads the verifier key of the log key the log was given (""
// when none: it is signed by a home's host key).
func LogKeyOf(ctx context.Context, q Querier) (string, error) {
	st, err := readLog(ctx, q, "")
	if err != nil {
		return "", err
	}
	return st.Key, nil
}

// CheckLogKey is what a store given a log key (key, its verifier key)
// checks as it opens: the log has recorded no key, or this one; else
// ErrLogKey, and the store does not open.
func CheckLogKey(ctx context.Context, q Querier, key string) error {
	recorded, err := LogKeyOf(ctx, q)
	if err != nil || recorded == "" {
		return err
	}
	return checkLogKey(recorded, key)
}

// LogVerifierKey is the verifier key of a store's log: the recorded
// log key when the store was given none (its own key, own, signs
// nothing there), else own.
func LogVerifierKey(ctx context.Context, q Querier, given bool, own string) (string, error) {
	if given {
		return own, nil
	}
	recorded, err := LogKeyOf(ctx, q)
	if err != nil || recorded == "" {
		return own, err
	}
	return recorded, nil
}

// LogPending reports whether chain entries wait to be integrated, and
// the integrated size: a driver reads it before it opens a write
// transaction for IntegrateLog, so that an idle sequencer writes (and
// syncs, and locks) nothing. key is as IntegrateLog's: a store given no
// log key has nothing to integrate in a log that records one.
func LogPending(ctx context.Context, q Querier, key string) (bool, uint64, error) {
	st, err := readLog(ctx, q, "")
	if err != nil {
		return false, 0, err
	}
	if st.Key != "" && key == "" {
		return false, st.Size, nil
	}
	var n int64
	err = q.QueryRow(ctx, `SELECT COUNT(*) FROM (
		SELECT seq FROM runtime_events WHERE seq = $1
		UNION ALL SELECT seq FROM attempt_records WHERE seq = $1) e`, int64(st.Size)+1).Scan(&n)
	if err != nil {
		return false, 0, fmt.Errorf("read the evidence chain: %w", err)
	}
	return n > 0, st.Size, nil
}

// LogCheckpoint is host.EvidenceLog.LogCheckpoint over q.
func LogCheckpoint(ctx context.Context, q Querier, size uint64) (*host.LogCheckpoint, error) {
	const op = "evidence log checkpoint"
	st, err := readLog(ctx, q, "")
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	if size == 0 {
		if st.Size == 0 {
			return nil, host.Errorf(op, "", host.ErrNotFound, "the log has no entries integrated yet")
		}
		return &host.LogCheckpoint{Size: st.Size, Root: st.Root, Note: st.Note, Time: st.At}, nil
	}
	if size > st.Size {
		return nil, host.Errorf(op, fmt.Sprint(size), host.ErrNotFound, "the log has %d entries integrated", st.Size)
	}
	var note, at string
	err = q.QueryRow(ctx, `SELECT note, at FROM evidence_checkpoints WHERE size = $1`, int64(size)).Scan(&note, &at)
	if err == ErrNoRows {
		return nil, host.Errorf(op, fmt.Sprint(size), host.ErrNotFound, "no checkpoint was signed at that size")
	}
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprint(size), err)
	}
	root, err := tlog.RootAt(ctx, TileStore{q}, size)
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprint(size), err)
	}
	t, _ := host.ParseTime(at)
	return &host.LogCheckpoint{Size: size, Root: root, Note: note, Time: t}, nil
}

// logSize resolves a proof's size (0: the newest) to one the log has a
// checkpoint of.
func logSize(ctx context.Context, q Querier, op string, size uint64) (uint64, error) {
	cp, err := LogCheckpoint(ctx, q, size)
	if err != nil {
		if he, ok := err.(*host.Error); ok {
			he.Op = op
		}
		return 0, err
	}
	return cp.Size, nil
}

// LogInclusion is host.EvidenceLog.LogInclusion over q.
func LogInclusion(ctx context.Context, q Querier, seq int64, size uint64) (*host.LogProof, error) {
	const op = "evidence log inclusion proof"
	if seq < 1 {
		return nil, host.Invalid(op, "seq", "entry %d: chain entries are numbered from 1", seq)
	}
	size, err := logSize(ctx, q, op, size)
	if err != nil {
		return nil, err
	}
	index := uint64(seq - 1)
	if index >= size {
		return nil, host.Errorf(op, fmt.Sprint(seq), host.ErrNotFound, "entry %d is not in the log of size %d (not integrated yet, or beyond it)", seq, size)
	}
	var hash string
	err = q.QueryRow(ctx, `SELECT hash FROM runtime_events WHERE seq = $1 UNION ALL SELECT hash FROM attempt_records WHERE seq = $1`, seq).Scan(&hash)
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprint(seq), fmt.Errorf("read chain entry %d: %w", seq, err))
	}
	entry, err := LogEntry(seq, hash)
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprint(seq), err)
	}
	p, err := tlog.InclusionProof(ctx, TileStore{q}, index, size)
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprint(seq), err)
	}
	return &host.LogProof{Index: index, Size: size, LeafHash: tlog.LeafHash(entry), Hashes: p}, nil
}

// LogConsistency is host.EvidenceLog.LogConsistency over q.
func LogConsistency(ctx context.Context, q Querier, from, to uint64) (*host.LogProof, error) {
	const op = "evidence log consistency proof"
	if from == 0 {
		return nil, host.Invalid(op, "from", "size 0: a consistency proof starts from a checkpoint of at least one entry")
	}
	if to != 0 && from > to {
		return nil, host.Invalid(op, "from", "size %d is larger than size %d", from, to)
	}
	to, err := logSize(ctx, q, op, to)
	if err != nil {
		return nil, err
	}
	if from > to {
		return nil, host.Invalid(op, "from", "size %d is larger than the log's %d", from, to)
	}
	if _, err := logSize(ctx, q, op, from); err != nil {
		return nil, err
	}
	p, err := tlog.ConsistencyProof(ctx, TileStore{q}, from, to)
	if err != nil {
		return nil, host.Wrap(op, fmt.Sprintf("%d..%d", from, to), err)
	}
	return &host.LogProof{From: from, Size: to, Hashes: p}, nil
}

// SignWith is IntegrateLog's sign for a signer the driver gets when it
// first signs (the host key may not exist before).
func SignWith(signer func() (*tlog.Signer, error)) func(tlog.Checkpoint) ([]byte, error) {
	return func(c tlog.Checkpoint) ([]byte, error) {
		s, err := signer()
		if err != nil {
			return nil, err
		}
		c.Origin = s.Origin()
		return s.Sign(c)
	}
}

// LogOrigin is the default origin line of a home's log: packrun.local/
// and the first 16 hex digits of the SHA-256 of the host key's public
// half (a valid note key name: no spaces, no '+').
func LogOrigin(pub []byte) string {
	sum := sha256.Sum256(pub)
	return "packrun.local/" + hex.EncodeToString(sum[:8])
}
