package packrun

import (
	"context"
	"errors"
	"fmt"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/replay"
)

// SealPolicy says which exported files (traces, evidence bundles) a reader
// accepts: each is sealed by the host that exported it (host.Seal), and a
// seal counts only if it is by a trusted host key.
type SealPolicy struct {
	// HostKeys are trusted host keys (hex Ed25519 public keys, as a seal
	// names them) besides this host's own.
	HostKeys []string
	// AllowUnsealed accepts files without a seal: exported by a packrun
	// from before seals, whose digest anyone can recompute after an edit.
	AllowUnsealed bool
	// AnyHostKey accepts a valid seal by any key, for a reader with no key
	// to expect (the caller then shows whose it is): the file is shown to
	// be unchanged since some host sealed it, not who that was.
	AnyHostKey bool
}

// ErrUnsealed is matched by a file refused for having no seal.
var ErrUnsealed = errors.New("not sealed by a host key (exported by a packrun from before seals?): export it again, or pass --allow-unsealed to accept it")

// HostKey is this host's public key (hex), which seals what it exports;
// "" until it has sealed or anchored anything.
func (h *Host) HostKey() (string, error) { return h.store.HostPublicKey() }

// ExportTrace returns the trace file of a recorded attempt, sealed with
// this host's key.
func (h *Host) ExportTrace(ctx context.Context, attemptID string) ([]byte, error) {
	t, err := h.Trace(ctx, attemptID)
	if err != nil {
		return nil, err
	}
	return t.Marshal(h.store.SealDigest)
}

// TrustedKeys is this host's key and p's.
func (h *Host) TrustedKeys(p SealPolicy) ([]string, error) {
	own, err := h.HostKey()
	if err != nil {
		return nil, err
	}
	keys := append([]string(nil), p.HostKeys...)
	if own != "" {
		keys = append(keys, own)
	}
	return keys, nil
}

// CheckTraceSeal checks a parsed trace's seal (ParseTrace checked its
// digest): by a key this host trusts (TrustedKeys), or absent if p allows.
// A refusal wraps ErrInvalidTrace.
func (h *Host) CheckTraceSeal(t *Trace, p SealPolicy) error {
	trusted, err := h.TrustedKeys(p)
	if err != nil {
		return err
	}
	if err := CheckSeal(t.Seal, replay.Format, t.Digest, trusted, p); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTrace, err)
	}
	return nil
}

// CheckBundleSeal checks a bundle's seal against p and trusted keys. A
// refusal wraps ErrInvalidBundle.
func CheckBundleSeal(b *host.Bundle, trusted []string, p SealPolicy) error {
	digest, err := evidence.BundleDigest(b)
	if err == nil {
		err = CheckSeal(b.Seal, host.BundleFormat, digest, trusted, p)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBundle, err)
	}
	return nil
}

// CheckSeal checks the seal of a file of the given kind whose content
// hashes to digest: its signature, and that its key is one of trusted
// (or any, if p says so). A missing seal is refused unless p allows.
func CheckSeal(s *host.Seal, kind, digest string, trusted []string, p SealPolicy) error {
	if s == nil {
		if p.AllowUnsealed {
			return nil
		}
		return ErrUnsealed
	}
	if err := evidence.VerifySeal(s, kind, digest); err != nil {
		return err
	}
	if p.AnyHostKey {
		return nil
	}
	return evidence.CheckSealKey(s, trusted)
}
