package packrun

import (
	"context"
	"errors"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
)

// EvidenceLog is the host's Merkle-tree log over its evidence chain
// (host.EvidenceLog): signed checkpoints, inclusion and consistency
// proofs.
func (h *Host) EvidenceLog() host.EvidenceLog { return h.store }

// LogVerifierKey is the signed-note verifier key of the host's evidence
// log checkpoints ("origin+hash+base64key", the origin naming the home:
// packrun.local/ and 16 hex digits of the host key's hash): what an
// auditor needs to check a checkpoint or a proof offline.
func (h *Host) LogVerifierKey() (string, error) { return h.store.LogVerifierKey() }

// LogCheckpoint is the newest checkpoint of the host's evidence log: its
// size, root and the signed note (C2SP tlog-checkpoint) saying so. A log
// with nothing integrated yet is integrated first.
func (h *Host) LogCheckpoint(ctx context.Context) (*host.LogCheckpoint, error) {
	cp, err := h.store.LogCheckpoint(ctx, 0)
	if errors.Is(err, host.ErrNotFound) {
		return h.store.LogSync(ctx)
	}
	return cp, err
}

// ProveEntry returns the self-contained inclusion bundle (tlog.Bundle:
// the entry, its index, the proof, the signed checkpoint and the
// verifier key) of the evidence entry ref names, an attempt id or an
// event seq, in the log of the given size (0: the newest), integrating
// the log first if the entry is not yet.
func (h *Host) ProveEntry(ctx context.Context, ref string, size uint64) (*tlog.Bundle, error) {
	seq, entry, err := evidence.ResolveEntry(ctx, h.store, ref, "")
	if err != nil {
		return nil, err
	}
	return evidence.ProveEntry(ctx, h.store, seq, entry, size)
}

// ProveSince adds to b the consistency proof from saved, an older signed
// checkpoint of this log (an auditor's), to b's checkpoint.
func (h *Host) ProveSince(ctx context.Context, b *tlog.Bundle, saved []byte) error {
	return evidence.ProveSince(ctx, h.store, b, saved)
}

// LogConsistency proves that the log of size from is a prefix of the log
// of size to (0: the newest): both signed checkpoints and the proof.
func (h *Host) LogConsistency(ctx context.Context, from, to uint64) (*tlog.ConsistencyBundle, error) {
	p, err := h.store.LogConsistency(ctx, from, to)
	if err != nil {
		return nil, err
	}
	old, err := h.store.LogCheckpoint(ctx, p.From)
	if err != nil {
		return nil, err
	}
	cur, err := h.store.LogCheckpoint(ctx, p.Size)
	if err != nil {
		return nil, err
	}
	return &tlog.ConsistencyBundle{Old: old.Note, New: cur.Note, Proof: p.Hashes}, nil
}

// CheckLog proves that the current log is consistent with saved, a
// checkpoint of it kept earlier anywhere, or returns an error wrapping
// ErrLogDiverged naming where it diverges (fewer entries, other entries,
// another key).
func (h *Host) CheckLog(ctx context.Context, saved []byte) (old *tlog.Checkpoint, cur *host.LogCheckpoint, err error) {
	return evidence.CheckLog(ctx, h.store, saved)
}

// ErrLogDiverged is matched by CheckLog's finding that the evidence log
// is not an extension of the checkpoint.
var ErrLogDiverged = evidence.ErrLogDiverged
