package tlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packrun/packrun/internal/strictjson"
)

// MaxBundleBytes bounds an encoded Bundle or ConsistencyBundle
// DecodeBundle reads: an evidence entry, a proof and a checkpoint.
const MaxBundleBytes = 1 << 20

// Bundle is what an auditor needs to check, offline and with nothing but
// the log's verifier key, that an entry is in the log: the entry (or its
// leaf hash, when the entry is not to be shown), its index, the inclusion
// proof and the signed checkpoint it was proven against. It reveals
// hashes of other entries, never their content. Its JSON encoding is the
// exported form (byte strings in base64).
type Bundle struct {
	Entry      []byte   `json:"entry,omitempty"`
	LeafHash   []byte   `json:"leaf_hash,omitempty"`
	Index      uint64   `json:"index"`
	Proof      [][]byte `json:"proof"`
	Checkpoint string   `json:"checkpoint"` // the signed note
	// VerifierKey names the key the checkpoint is signed with (optional):
	// a reader trusts it only if it also opens a checkpoint the reader
	// holds from the log (CheckSince).
	VerifierKey string `json:"verifier_key,omitempty"`
	// Since (optional) proves that the log grew only by appending from an
	// older checkpoint (an auditor's) to Checkpoint.
	Since *Since `json:"since,omitempty"`
}

// Since is a consistency proof from an older checkpoint (a signed note)
// to a bundle's checkpoint.
type Since struct {
	Checkpoint string   `json:"checkpoint"`
	Proof      [][]byte `json:"proof"`
}

// ConsistencyBundle is the exported proof that the log grew from the
// checkpoint Old to the checkpoint New (both signed notes) only by
// appending.
type ConsistencyBundle struct {
	Old   string   `json:"old"`
	New   string   `json:"new"`
	Proof [][]byte `json:"proof"`
}

// DecodeBundle decodes an exported bundle: strict JSON (no duplicate or
// unknown keys, nothing after it) of at most MaxBundleBytes, with hashes
// of the right size. It does not check the proof: CheckEntry does.
func DecodeBundle(b []byte) (*Bundle, error) {
	var out Bundle
	if err := decodeStrict("proof bundle", b, &out); err != nil {
		return nil, err
	}
	if out.Entry == nil && out.LeafHash == nil {
		return nil, errors.New("proof bundle: neither entry nor leaf_hash")
	}
	if out.LeafHash != nil {
		if err := checkHash("proof bundle leaf_hash", out.LeafHash); err != nil {
			return nil, err
		}
	}
	if err := checkProofHashes("proof bundle", out.Proof); err != nil {
		return nil, err
	}
	if out.Since != nil {
		if err := checkProofHashes("proof bundle since", out.Since.Proof); err != nil {
			return nil, err
		}
	}
	return &out, nil
}

// DecodeConsistencyBundle decodes an exported consistency proof, as
// strictly as DecodeBundle.
func DecodeConsistencyBundle(b []byte) (*ConsistencyBundle, error) {
	var out ConsistencyBundle
	if err := decodeStrict("consistency proof", b, &out); err != nil {
		return nil, err
	}
	if err := checkProofHashes("consistency proof", out.Proof); err != nil {
		return nil, err
	}
	return &out, nil
}

func decodeStrict(what string, b []byte, v any) error {
	if len(b) > MaxBundleBytes {
		return fmt.Errorf("%s: %d bytes, more than %d", what, len(b), MaxBundleBytes)
	}
	if err := strictjson.Check(b, 4); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func checkProofHashes(what string, p [][]byte) error {
	if len(p) > MaxProofHashes {
		return fmt.Errorf("%s: %d proof hashes, more than any proof has (%d)", what, len(p), MaxProofHashes)
	}
	for i, h := range p {
		if len(h) != HashSize {
			return fmt.Errorf("%s: %w", what, checkHash(fmt.Sprintf("proof hash %d", i), h))
		}
	}
	return nil
}

// Encode is the bundle's exported form.
func (b *Bundle) Encode() ([]byte, error) { return json.Marshal(b) }

// Encode is the proof's exported form.
func (p *ConsistencyBundle) Encode() ([]byte, error) { return json.Marshal(p) }

// CheckEntry checks, with nothing but the log's verifier key vkey, that
// the bundle's entry is in the log: its checkpoint is signed by the key,
// and its proof leads from the entry's leaf hash at its index to the
// checkpoint's root. It returns the checkpoint proven against.
func CheckEntry(b *Bundle, vkey string) (*Checkpoint, error) {
	cp, err := OpenCheckpoint([]byte(b.Checkpoint), vkey)
	if err != nil {
		return nil, fmt.Errorf("proof bundle: %w", err)
	}
	leaf := b.LeafHash
	switch {
	case b.Entry != nil && leaf != nil && !bytes.Equal(LeafHash(b.Entry), leaf):
		return nil, errors.New("proof bundle: leaf_hash is not the hash of entry")
	case b.Entry != nil:
		leaf = LeafHash(b.Entry)
	case leaf == nil:
		return nil, errors.New("proof bundle: neither entry nor leaf_hash")
	}
	if err := VerifyInclusion(b.Index, cp.Size, leaf, b.Proof, cp.Root); err != nil {
		return nil, fmt.Errorf("proof bundle: %w", err)
	}
	return cp, nil
}

// CheckConsistency checks, with nothing but the log's verifier key, that
// both checkpoints are the log's and that the log of newNote grew from
// the log of oldNote only by appending. It returns both checkpoints.
func CheckConsistency(oldNote, newNote []byte, p [][]byte, vkey string) (old, cur *Checkpoint, err error) {
	v, err := NewVerifier(vkey)
	if err != nil {
		return nil, nil, err
	}
	if old, err = openCheckpoint(oldNote, v); err != nil {
		return nil, nil, fmt.Errorf("old %w", err)
	}
	if cur, err = openCheckpoint(newNote, v); err != nil {
		return nil, nil, fmt.Errorf("new %w", err)
	}
	if err := VerifyConsistency(old.Size, cur.Size, p, old.Root, cur.Root); err != nil {
		return nil, nil, err
	}
	return old, cur, nil
}

// CheckSince checks a bundle as an auditor does, offline: saved is a
// checkpoint the auditor kept from the log (a signed note). The verifier
// key is vkey or, when vkey is "", the bundle's own VerifierKey, trusted
// only because it opens saved (a key that verifies a checkpoint the
// auditor took from the log is the log's key). It checks the entry's
// inclusion (CheckEntry) and that the log only grew from saved to the
// bundle's checkpoint: equal checkpoints, or the bundle's Since proof
// from a checkpoint of saved's size and root. It returns the bundle's
// checkpoint and saved's.
func CheckSince(b *Bundle, saved []byte, vkey string) (cur, old *Checkpoint, err error) {
	if vkey == "" {
		if b.VerifierKey == "" {
			return nil, nil, errors.New("proof bundle: names no verifier key: pass the log's key")
		}
		vkey = b.VerifierKey
	}
	if old, err = OpenCheckpoint(saved, vkey); err != nil {
		return nil, nil, fmt.Errorf("saved %w", err)
	}
	if cur, err = CheckEntry(b, vkey); err != nil {
		return nil, nil, err
	}
	switch {
	case old.Size > cur.Size:
		return nil, nil, fmt.Errorf("proof bundle: its checkpoint (size %d) is older than the saved one (size %d): prove the entry again", cur.Size, old.Size)
	case old.Size == cur.Size:
		if !bytes.Equal(old.Root, cur.Root) {
			return nil, nil, fmt.Errorf("proof bundle: its checkpoint and the saved one both have size %d but different roots: the log forked", cur.Size)
		}
		return cur, old, nil
	case b.Since == nil:
		return nil, nil, fmt.Errorf("proof bundle: no consistency proof from the saved checkpoint (size %d) to its own (size %d): export it with --since-checkpoint", old.Size, cur.Size)
	}
	from, err := OpenCheckpoint([]byte(b.Since.Checkpoint), vkey)
	if err != nil {
		return nil, nil, fmt.Errorf("proof bundle since: %w", err)
	}
	if from.Size != old.Size || !bytes.Equal(from.Root, old.Root) {
		return nil, nil, fmt.Errorf("proof bundle: its consistency proof starts from size %d, not from the saved checkpoint (size %d)", from.Size, old.Size)
	}
	if err := VerifyConsistency(old.Size, cur.Size, b.Since.Proof, old.Root, cur.Root); err != nil {
		return nil, nil, fmt.Errorf("proof bundle: %w", err)
	}
	return cur, old, nil
}
