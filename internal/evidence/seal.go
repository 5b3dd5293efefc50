package evidence

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/packrun/packrun/host"
)

// ErrSeal is matched by every seal that does not verify.
var ErrSeal = errors.New("seal does not verify")

// sealed is what a seal signs: the file's kind, then its digest, so that a
// signature over one kind of file is never taken for another's.
func sealed(kind, digest string) []byte { return []byte("packrun.seal.v1\n" + kind + "\n" + digest) }

// SealDigest signs digest, the digest of a file of the given kind, with
// key.
func SealDigest(key ed25519.PrivateKey, kind, digest string) *host.Seal {
	return &host.Seal{
		HostKey:   hex.EncodeToString(key.Public().(ed25519.PublicKey)),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(key, sealed(kind, digest))),
	}
}

// VerifySeal checks that s signs digest under the key it names. Whether
// that key is trusted is the caller's question (CheckSealKey).
func VerifySeal(s *host.Seal, kind, digest string) error {
	if s == nil {
		return fmt.Errorf("%w: the file is not sealed", ErrSeal)
	}
	pub, err := hex.DecodeString(s.HostKey)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: host_key is not an Ed25519 public key", ErrSeal)
	}
	sig, err := base64.StdEncoding.DecodeString(s.Signature)
	if err != nil || !ed25519.Verify(ed25519.PublicKey(pub), sealed(kind, digest), sig) {
		return fmt.Errorf("%w: the file was changed after host key %.16s… sealed it", ErrSeal, s.HostKey)
	}
	return nil
}

// CheckSealKey reports whether a verified seal is by one of the trusted
// host keys (hex).
func CheckSealKey(s *host.Seal, trusted []string) error {
	for _, k := range trusted {
		if k == s.HostKey {
			return nil
		}
	}
	return fmt.Errorf("%w: sealed by host key %.16s…, which is not this host's key nor one passed with --host-key", ErrSeal, s.HostKey)
}

// BundleDigest is the digest a bundle's seal signs: the sha256 of the
// bundle's JSON without its seal and its log proof (which checks itself).
// JSON values inside are compacted by the encoding, so an indented copy
// of a bundle has the same digest.
func BundleDigest(b *host.Bundle) (string, error) {
	c := *b
	c.Seal, c.Log = nil, nil
	raw, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}
