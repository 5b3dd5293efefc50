package registry

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
)

// GenerateKey writes a new ECDSA P-256 key pair: PREFIX.key (PKCS#8 PEM
// "PRIVATE KEY", mode 0600) and PREFIX.pub (PKIX PEM "PUBLIC KEY"). It never
// overwrites: if either file exists it returns an error matching ErrExists
// and writes nothing.
//
// The private key is not encrypted; keep it out of source control, or use
// cosign's encrypted keys and sign with cosign (packrun verifies those
// bundles too).
func GenerateKey(prefix string) error {
	if prefix == "" {
		return errors.New("generate key: empty path prefix")
	}
	keyPath, pubPath := prefix+".key", prefix+".pub"
	for _, p := range []string{keyPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("generate key: %s: %w (remove it first or pick another prefix)", p, ErrExists)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("generate key: %w", err)
		}
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	pubPEM, err := marshalPublicKeyPEM(priv.Public())
	if err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	// O_EXCL: a file created between the check above and now is not clobbered.
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("generate key: %w", err)
	}
	if err := writeNew(pubPath, pubPEM, 0o644); err != nil {
		_ = os.Remove(keyPath)
		return fmt.Errorf("generate key: %w", err)
	}
	return nil
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrExists)
		}
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// LoadPrivateKey reads a PEM private key for Sign: PKCS#8 ("PRIVATE KEY",
// as written by GenerateKey) or SEC 1 ("EC PRIVATE KEY"). Sign needs ECDSA
// P-256.
func LoadPrivateKey(path string) (crypto.Signer, error) {
	data, err := readLimited(path, MaxKeyFileSize)
	if err != nil {
		return nil, fmt.Errorf("load private key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("load private key %s: no PEM block found", path)
	}
	var key any
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY", "ENCRYPTED PRIVATE KEY":
		return nil, fmt.Errorf("load private key %s: %s is an encrypted key; packrun reads unencrypted PKCS#8 keys (packrun keygen), or sign with cosign", path, quote(block.Type))
	default:
		return nil, fmt.Errorf("load private key %s: PEM block is %s, want \"PRIVATE KEY\"", path, quote(block.Type))
	}
	if err != nil {
		return nil, fmt.Errorf("load private key %s: %w", path, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("load private key %s: unsupported key type %T", path, key)
	}
	if err := checkSigningKey(signer); err != nil {
		return nil, fmt.Errorf("load private key %s: %w", path, err)
	}
	return signer, nil
}

// LoadPublicKey reads a PKIX PEM public key ("PUBLIC KEY"), as written by
// GenerateKey or `cosign generate-key-pair`.
func LoadPublicKey(path string) (crypto.PublicKey, error) {
	data, err := readLimited(path, MaxKeyFileSize)
	if err != nil {
		return nil, fmt.Errorf("load public key: %w", err)
	}
	pub, err := parsePublicKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("load public key %s: %w", path, err)
	}
	return pub, nil
}

// parsePublicKeyPEM parses one PKIX "PUBLIC KEY" PEM block holding a key
// usable for Sigstore verification: ECDSA P-256/P-384/P-521, RSA ≥ 2048
// bits, or Ed25519.
func parsePublicKeyPEM(data []byte) (crypto.PublicKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found (want -----BEGIN PUBLIC KEY-----)")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("PEM block is %s, want \"PUBLIC KEY\"", quote(block.Type))
	}
	if b, _ := pem.Decode(rest); b != nil {
		return nil, errors.New("more than one PEM block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256(), elliptic.P384(), elliptic.P521():
		default:
			return nil, fmt.Errorf("unsupported ECDSA curve %s", k.Curve.Params().Name)
		}
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("RSA key of %d bits is too small (want ≥ 2048)", k.N.BitLen())
		}
	case ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported public key type %T", pub)
	}
	return pub, nil
}

func marshalPublicKeyPEM(pub crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// keyID is the public-key hint packrun writes into bundles and reports in
// verdicts: base64 (standard, padded) of the SHA-256 of the PKIX DER
// encoding, the same value sigstore-go uses for its key hints.
func keyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:]), nil
}

func checkSigningKey(s crypto.Signer) error {
	pub, ok := s.Public().(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return fmt.Errorf("signing key is %T, want ECDSA P-256", s.Public())
	}
	return nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return data, nil
}

// keypair is a sign.Keypair over a fixed ECDSA P-256 key (sigstore-go only
// ships an ephemeral one).
type keypair struct {
	signer crypto.Signer
	hint   []byte
}

var _ sign.Keypair = (*keypair)(nil)

func newKeypair(s crypto.Signer) (*keypair, error) {
	if err := checkSigningKey(s); err != nil {
		return nil, err
	}
	id, err := keyID(s.Public())
	if err != nil {
		return nil, err
	}
	return &keypair{signer: s, hint: []byte(id)}, nil
}

func (k *keypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}

func (k *keypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}

func (k *keypair) GetHint() []byte { return k.hint }

func (k *keypair) GetKeyAlgorithm() string { return "ECDSA" }

func (k *keypair) GetPublicKey() crypto.PublicKey { return k.signer.Public() }

func (k *keypair) GetPublicKeyPem() (string, error) {
	b, err := marshalPublicKeyPEM(k.signer.Public())
	return string(b), err
}

// SignData signs the SHA-256 digest of data and returns the signature and
// the digest, as sign.Keypair requires.
func (k *keypair) SignData(ctx context.Context, data []byte) ([]byte, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	digest := sha256.Sum256(data)
	sig, err := k.signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		return nil, nil, err
	}
	return sig, digest[:], nil
}
