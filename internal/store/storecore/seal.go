package storecore

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/packrun/packrun/host"
)

// Secret memory values (host.PutOptions.Secret) are sealed at rest with
// AES-256-GCM, in one format for every backend (internal/store/sqlite keeps
// the key in a file, internal/store/postgres takes it from its options), so
// that a sealed value moves between backends as it is under the same key:
//
//	0x00 0x01 | key id (4 bytes) | nonce (12 bytes) | ciphertext and tag
//
// 0x00 never starts JSON, so a stored value is sealed exactly when it
// starts with it; 0x01 is the format version; the key id is the first
// bytes of the key's SHA-256; the additional data is the header and the
// entry's tenant, namespace and key, so a value copied to another entry
// fails authentication.
const (
	sealMarker    = 0x00
	sealVersion   = 0x01
	keyIDLen      = 4
	sealHeaderLen = 2 + keyIDLen
	nonceLen      = 12
	// SecretKeyLen is the length of a secret key's raw bytes.
	SecretKeyLen = 32
)

var (
	// ErrSecretKey: no secret key was configured, or the key configured
	// is not the one a value was sealed with.
	ErrSecretKey = errors.New("secret key")
	// ErrSecretKeyFile: as ErrSecretKey, for a key read from a file
	// (NewSecretKeyFile): the file is missing, unreadable, or holds
	// another key than the one a value was sealed with.
	ErrSecretKeyFile = errors.New("secret key file")
	// ErrSecretAltered: a sealed value fails authentication: it was
	// altered, or copied from another entry.
	ErrSecretAltered = errors.New("sealed secret value fails authentication")
)

// SecretKeyFileEnv names the environment variable the CLI reads for the
// key file of a SQLite home; error messages point operators at it.
const SecretKeyFileEnv = "PACKRUN_SECRET_KEY_FILE"

// Sealed reports whether a stored value is in the sealed form.
func Sealed(v []byte) bool { return len(v) > 0 && v[0] == sealMarker }

// SecretKey seals and opens memory values.
type SecretKey struct {
	aead cipher.AEAD
	id   [keyIDLen]byte
	// file is where the key was read from, named in errors ("": a key
	// given in options).
	file string
}

// NewSecretKeyFile loads a key read from file: its errors name the file
// (and wrap ErrSecretKeyFile).
func NewSecretKeyFile(raw []byte, file string) (*SecretKey, error) {
	k, err := NewSecretKey(raw)
	if err != nil {
		return nil, err
	}
	k.file = file
	return k, nil
}

// SealKeyID is the id (hex) of the key a sealed value names, "?" if it is
// too short to name one.
func SealKeyID(v []byte) string {
	if len(v) < sealHeaderLen {
		return "?"
	}
	return hex.EncodeToString(v[2:sealHeaderLen])
}

// CheckSealFormat refuses a stored value that is not sealed in a format
// this packrun reads; it needs no key.
func CheckSealFormat(v []byte) error {
	if len(v) < 2 || v[1] != sealVersion {
		if len(v) >= 2 && v[1] > sealVersion {
			return fmt.Errorf("sealed secret value has format version %d, which this packrun cannot read: use a newer packrun", v[1])
		}
		return fmt.Errorf("%w: not a sealed value of a known format", ErrSecretAltered)
	}
	return nil
}

// NewSecretKey loads a key of SecretKeyLen raw bytes.
func NewSecretKey(raw []byte) (*SecretKey, error) {
	if len(raw) != SecretKeyLen {
		return nil, fmt.Errorf("%w: is %d bytes, want %d", ErrSecretKey, len(raw), SecretKeyLen)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &SecretKey{aead: aead}
	sum := sha256.Sum256(raw)
	copy(k.id[:], sum[:])
	return k, nil
}

// sealAAD is the additional data of an entry's sealed value: the header,
// then tenant, namespace and key, each after its length.
func sealAAD(header []byte, sc host.Scope, key string) []byte {
	aad := make([]byte, 0, len(header)+len(sc.Tenant)+len(sc.Namespace)+len(key)+3*binary.MaxVarintLen64)
	aad = append(aad, header...)
	for _, s := range []string{sc.Tenant, sc.Namespace, key} {
		aad = binary.AppendUvarint(aad, uint64(len(s)))
		aad = append(aad, s...)
	}
	return aad
}

// Seal returns the sealed form of the value of entry key in sc.
func (k *SecretKey) Seal(sc host.Scope, key string, value []byte) []byte {
	out := make([]byte, sealHeaderLen+nonceLen, sealHeaderLen+nonceLen+len(value)+k.aead.Overhead())
	out[0], out[1] = sealMarker, sealVersion
	copy(out[2:sealHeaderLen], k.id[:])
	nonce := out[sealHeaderLen:]
	rand.Read(nonce)
	return k.aead.Seal(out, nonce, value, sealAAD(out[:sealHeaderLen], sc, key))
}

// Open returns the plaintext of the sealed value v of entry key in sc.
func (k *SecretKey) Open(sc host.Scope, key string, v []byte) ([]byte, error) {
	if err := CheckSealFormat(v); err != nil {
		return nil, err
	}
	if len(v) < sealHeaderLen+nonceLen+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: it is cut short; put the value again", ErrSecretAltered)
	}
	if !bytes.Equal(v[2:sealHeaderLen], k.id[:]) {
		if k.file != "" {
			return nil, fmt.Errorf("%w %s holds key %x, but this value was sealed with key %s: restore the file that holds that key (or point %s at it)",
				ErrSecretKeyFile, k.file, k.id, SealKeyID(v), SecretKeyFileEnv)
		}
		return nil, fmt.Errorf("%w: this store's key is %x, but the value was sealed with key %s", ErrSecretKey, k.id, SealKeyID(v))
	}
	nonce := v[sealHeaderLen : sealHeaderLen+nonceLen]
	pt, err := k.aead.Open(nil, nonce, v[sealHeaderLen+nonceLen:], sealAAD(v[:sealHeaderLen], sc, key))
	if err != nil && k.file != "" {
		return nil, fmt.Errorf("%w with key %x (%s): it was altered, or copied from another entry; put the value again", ErrSecretAltered, k.id, k.file)
	}
	if err != nil {
		return nil, fmt.Errorf("%w with key %x: it was altered, or copied from another entry; put the value again", ErrSecretAltered, k.id)
	}
	return pt, nil
}
