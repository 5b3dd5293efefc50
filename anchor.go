package packrun

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
	"unicode"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/blobs"
	"github.com/packrun/packrun/internal/evidence"
)

// A home's evidence chain is anchored by a checkpoint signed with its host
// key (internal/evidence). Once anchored, the home refuses to open while
// the checkpoint or the key is missing, damaged or replaced
// (host.ErrUnanchored): nothing re-creates them behind the operator's
// back. The two functions here are the operator's explicit commands, and
// each leaves a runtime event in the chain saying what was done and why.

// Reanchoring is what Reanchor and RotateHostKey did.
type Reanchoring struct {
	// Event is the runtime event recording it (evidence_reanchored or
	// host_key_rotated); the chain is anchored at it.
	Event *host.Event `json:"event"`
	// Before is the anchor as it was: the checkpoint's head and key, the
	// recorded key, what was wrong.
	Before *host.AnchorState `json:"before"`
	// HostKey is the key the chain is anchored with now (hex).
	HostKey string `json:"host_key"`
	// RetiredKeyFile holds the previous key after a rotation.
	RetiredKeyFile string `json:"retired_key_file,omitempty"`
}

// maxReasonLen bounds an operator's reason.
const maxReasonLen = 1000

// checkReason refuses an empty reason, or one that is not one line of
// printable text.
func checkReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return "", usageErr("a reason is required (--reason \"...\"): it is recorded in the evidence chain")
	case len(reason) > maxReasonLen:
		return "", usageErr("the reason is longer than %d bytes", maxReasonLen)
	case strings.IndexFunc(reason, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0:
		return "", usageErr("the reason must be one line of printable text")
	}
	return reason, nil
}

// Reanchor anchors the evidence chain of the home at home anew, at its
// current head, with the current host key (created if the home has none):
// the operator's answer to a home that refuses to open because its
// checkpoint or host key was lost. It appends an evidence_reanchored event
// with reason, what was wrong, the old checkpoint's head and key and the
// new key, and anchors the chain at that event. A sound anchor is
// re-anchored too (the event then says nothing was wrong).
func Reanchor(ctx context.Context, home string, cfg Config, reason string) (*Reanchoring, error) {
	reason, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	cfg.MustExist, cfg.reanchor = true, true
	h, err := Open(ctx, home, cfg)
	if err != nil {
		return nil, err
	}
	defer h.Close(context.Background())
	before, err := h.store.AnchorState(ctx)
	if err != nil {
		return nil, err
	}
	newKey := before.HostKey
	if newKey == "" {
		// The key file is gone: make the one the chain is anchored with
		// from now on (the SQLite store's key file; a PostgreSQL node's
		// is made when it opens).
		key, err := evidence.NewHostKey(before.KeyFile).Signing()
		if err != nil {
			return nil, err
		}
		newKey = hex.EncodeToString(key.Public().(ed25519.PublicKey))
	}
	return h.reanchor(ctx, host.EventEvidenceReanchored, before, newKey, map[string]any{"reason": reason})
}

// reanchor appends an event of type typ (data: extra, and the anchor
// before and after) and anchors the chain at it with newKey, the host
// key the store now holds.
func (h *Host) reanchor(ctx context.Context, typ string, before *host.AnchorState, newKey string, extra map[string]any) (*Reanchoring, error) {
	data := map[string]any{"checkpoint_file": before.CheckpointFile, "new_key": newKey}
	for k, v := range extra {
		data[k] = v
	}
	if before.Problem != "" {
		data["problem"] = before.Problem
	}
	if before.Checkpoint != nil {
		data["old_checkpoint"] = map[string]any{"seq": before.Checkpoint.Seq, "hash": before.Checkpoint.Hash, "key": before.CheckpointKey}
	}
	if before.RecordedKey != "" {
		data["old_key"] = before.RecordedKey
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	e, err := h.store.Reanchor(ctx, host.Event{Type: typ, Data: raw})
	if err != nil {
		return nil, err
	}
	h.log.Warn("evidence chain re-anchored", "event", typ, "seq", e.Seq, "host_key", newKey, "problem", before.Problem)
	return &Reanchoring{Event: e, Before: before, HostKey: newKey}, nil
}

// KeyRotationFormat is the first line of the text the old host key signs
// to hand the chain over to the new one.
const KeyRotationFormat = "packrun.host-key-rotation/v1"

// KeyHandover is the text the old key signs in a rotation: the format,
// both public keys (hex) and the time, one a line.
func KeyHandover(oldKey, newKey, at string) []byte {
	return []byte(KeyRotationFormat + "\n" + oldKey + "\n" + newKey + "\n" + at + "\n")
}

// RotateHostKey replaces the host key of the home at home with a new one.
// The anchor must be sound (Open checks it). The old key signs the
// hand-over to the new (KeyHandover), the old key file is kept beside the
// new one as <key file>.retired-<first 16 hex digits> (bundles and traces
// it sealed verify with it: pass its public key as --host-key), and a
// host_key_rotated event carrying both keys, the signature and reason
// anchors the chain with the new key.
//
// A crash between replacing the key file and appending the event leaves a
// home that refuses to open because its key was replaced; `packrun
// evidence reanchor` finishes the job, and the retired file says what
// happened.
func RotateHostKey(ctx context.Context, home string, cfg Config, reason string) (*Reanchoring, error) {
	reason, err := checkReason(reason)
	if err != nil {
		return nil, err
	}
	cfg.MustExist = true
	h, err := Open(ctx, home, cfg) // refuses a lost anchor: re-anchor first
	if err != nil {
		return nil, err
	}
	before, err := h.store.AnchorState(ctx)
	if cerr := h.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	keyFile := h.cfg.HostKeyFile
	if keyFile == "" {
		keyFile = filepath.Join(home, "host.key")
	}
	old, err := evidence.NewHostKey(keyFile).Load(false)
	if err != nil {
		return nil, fmt.Errorf("rotate the host key: %w", err)
	}
	oldPub := hex.EncodeToString(old.Public().(ed25519.PublicKey))
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, err
	}
	newPub := hex.EncodeToString(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
	at := host.FormatTime(time.Now())
	handover := base64.StdEncoding.EncodeToString(ed25519.Sign(old, KeyHandover(oldPub, newPub, at)))

	retired := fmt.Sprintf("%s.retired-%s", keyFile, oldPub[:16])
	if err := blobs.WriteFile(retired, []byte(hex.EncodeToString(old.Seed())+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("keep the old host key: %w", err)
	}
	if err := blobs.WriteFile(keyFile, []byte(hex.EncodeToString(seed)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the new host key %s: %w", keyFile, err)
	}

	cfg.reanchor = true
	h, err = Open(ctx, home, cfg)
	if err != nil {
		return nil, err
	}
	defer h.Close(context.Background())
	now, err := h.store.AnchorState(ctx)
	if err != nil {
		return nil, err
	}
	if now.HostKey != newPub {
		return nil, errors.New("rotate the host key: the store does not see the new key") // another process replaced it meanwhile
	}
	r, err := h.reanchor(ctx, host.EventHostKeyRotated, before, newPub, map[string]any{
		"reason": reason, "old_key": oldPub, "handover": handover, "handover_time": at})
	if err != nil {
		return nil, err
	}
	r.RetiredKeyFile = retired
	return r, nil
}

// VerifyKeyRotation checks a host_key_rotated event's data: the old key
// signed the hand-over to the new one.
func VerifyKeyRotation(data json.RawMessage) error {
	var d struct {
		OldKey       string `json:"old_key"`
		NewKey       string `json:"new_key"`
		Handover     string `json:"handover"`
		HandoverTime string `json:"handover_time"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return fmt.Errorf("key rotation: %w", err)
	}
	pub, err := hex.DecodeString(d.OldKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return errors.New("key rotation: old_key is not an Ed25519 public key")
	}
	sig, err := base64.StdEncoding.DecodeString(d.Handover)
	if err != nil {
		return errors.New("key rotation: handover is not base64")
	}
	if !ed25519.Verify(pub, KeyHandover(d.OldKey, d.NewKey, d.HandoverTime), sig) {
		return errors.New("key rotation: the old key did not sign the hand-over to the new one")
	}
	return nil
}
