package sqlite

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/packrun/packrun/host"
)

// Secret memory values (host.PutOptions.Secret) are sealed at rest with
// AES-256-GCM under a key kept in a file apart from the database
// (Options.SecretKeyFile), so a copy of packrun.db, its WAL or a backup of
// it does not hold them in clear. Other values stay plaintext. A sealed
// value is
//
//	0x00 0x01 | key id (4 bytes) | nonce (12 bytes) | ciphertext and tag
//
// 0x00 never starts JSON, so a stored value is sealed exactly when it
// starts with it; 0x01 is the format version. The key id (the first bytes
// of the key's SHA-256) tells a wrong key file apart from an altered value.
// The nonce is random per value. The additional data is the header and the
// entry's tenant, namespace and key, so a sealed value copied to another
// entry fails authentication.
//
// Get opens a sealed value and caches the plaintext in memory only (the
// read cache, memCache), so a repeated read pays no cryptography. A secret
// value without the marker was stored by an older packrun: it reads as it
// is, and the next Open seals it (sealPlaintextSecrets).
const (
	sealMarker    = 0x00
	sealVersion   = 0x01
	keyIDLen      = 4
	sealHeaderLen = 2 + keyIDLen
	nonceLen      = 12
	keyLen        = 32
)

// SecretKeyEnv names the environment variable the CLI reads for
// Options.SecretKeyFile; error messages point operators at it.
const SecretKeyEnv = "PACKRUN_SECRET_KEY_FILE"

func sealed(v []byte) bool { return len(v) > 0 && v[0] == sealMarker }

// secretKey is a loaded key.
type secretKey struct {
	aead cipher.AEAD
	id   [keyIDLen]byte
}

func newSecretKey(raw []byte) (*secretKey, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &secretKey{aead: aead}
	sum := sha256.Sum256(raw)
	copy(k.id[:], sum[:])
	return k, nil
}

// keyring reads the key file at the first need and keeps the key for the
// life of the Store. A failed read is not kept: restoring the file mends
// the next call.
type keyring struct {
	path string
	db   *sql.DB
	mu   sync.Mutex
	key  *secretKey
}

// get returns the key. With create, a missing key file is created, unless
// the store holds values sealed with some key already: a new key could
// never open them, so the file has been lost or is looked for elsewhere.
func (k *keyring) get(ctx context.Context, create bool) (*secretKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.key != nil {
		return k.key, nil
	}
	key, err := readKeyFile(k.path)
	if errors.Is(err, fs.ErrNotExist) && create {
		var n int
		var first []byte
		if qerr := k.db.QueryRowContext(ctx, `SELECT COUNT(*), MIN(value) FROM memory_entries WHERE secret = 1 AND substr(value, 1, 1) = x'00'`).Scan(&n, &first); qerr != nil {
			return nil, qerr
		}
		if n > 0 {
			return nil, fmt.Errorf("%w %s does not exist, but %d secret value(s) in this store are sealed with key %s: restore the file from your backup (or point %s at it); if it is lost, delete those values (packrun memory delete) before storing new secrets",
				ErrSecretKey, k.path, n, keyIDOf(first), SecretKeyEnv)
		}
		key, err = createKeyFile(k.path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %s does not exist: restore it from your backup (or point %s at it); without it this store's secret values cannot be read", ErrSecretKey, k.path, SecretKeyEnv)
	}
	if err != nil {
		return nil, err
	}
	k.key = key
	return key, nil
}

// readKeyFile reads a key file: 64 hex digits (and optionally a newline).
// A missing file is reported as the os error (fs.ErrNotExist).
func readKeyFile(path string) (*secretKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecretKey, err)
	}
	raw, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(raw) != keyLen {
		return nil, fmt.Errorf("%w %s is not a packrun secret key (want %d hex digits, as from `openssl rand -hex %d`): restore it from your backup", ErrSecretKey, path, 2*keyLen, keyLen)
	}
	return newSecretKey(raw)
}

// createKeyFile writes a new random key to path, 0600, atomically and
// exclusively: the key goes to a temporary file (created O_EXCL), which is
// synced and then linked to path; a link fails if path exists. If another
// process created path first, its key is the one read.
func createKeyFile(path string) (*secretKey, error) {
	raw := make([]byte, keyLen)
	rand.Read(raw)
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".secret.key-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrSecretKey, path, err)
	}
	_, err = tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	os.Remove(tmp.Name())
	if errors.Is(err, fs.ErrExist) {
		return readKeyFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: create %s: %w", ErrSecretKey, path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return newSecretKey(raw)
}

func keyIDOf(v []byte) string {
	if len(v) < sealHeaderLen {
		return "?"
	}
	return hex.EncodeToString(v[2:sealHeaderLen])
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

// seal returns the sealed form of an entry's value, creating the key file
// if this is the first secret.
func (k *keyring) seal(ctx context.Context, sc host.Scope, key string, value []byte) ([]byte, error) {
	sk, err := k.get(ctx, true)
	if err != nil {
		return nil, err
	}
	out := make([]byte, sealHeaderLen+nonceLen, sealHeaderLen+nonceLen+len(value)+sk.aead.Overhead())
	out[0], out[1] = sealMarker, sealVersion
	copy(out[2:sealHeaderLen], sk.id[:])
	var nonce [nonceLen]byte
	rand.Read(nonce[:])
	copy(out[sealHeaderLen:], nonce[:])
	return sk.aead.Seal(out, nonce[:], value, sealAAD(out[:sealHeaderLen], sc, key)), nil
}

// open returns the plaintext of an entry's sealed value.
func (k *keyring) open(ctx context.Context, sc host.Scope, key string, v []byte) ([]byte, error) {
	if len(v) < 2 || v[1] != sealVersion {
		if len(v) >= 2 && v[1] > sealVersion {
			return nil, fmt.Errorf("sealed secret value has format version %d, which this packrun cannot read: use a newer packrun", v[1])
		}
		return nil, fmt.Errorf("%w: not a sealed value of a known format", ErrSecretAltered)
	}
	sk, err := k.get(ctx, false)
	if err != nil {
		return nil, err
	}
	if len(v) < sealHeaderLen+nonceLen+sk.aead.Overhead() {
		return nil, fmt.Errorf("%w: it is cut short; put the value again", ErrSecretAltered)
	}
	if !bytes.Equal(v[2:sealHeaderLen], sk.id[:]) {
		return nil, fmt.Errorf("%w %s holds key %x, but this value was sealed with key %s: restore the file that holds that key (or point %s at it)",
			ErrSecretKey, k.path, sk.id, keyIDOf(v), SecretKeyEnv)
	}
	nonce := v[sealHeaderLen : sealHeaderLen+nonceLen]
	pt, err := sk.aead.Open(nil, nonce, v[sealHeaderLen+nonceLen:], sealAAD(v[:sealHeaderLen], sc, key))
	if err != nil {
		return nil, fmt.Errorf("%w with key %x (%s): it was altered, or copied from another entry; put the value again", ErrSecretAltered, sk.id, k.path)
	}
	return pt, nil
}

// sealPlaintextSecrets seals, in one transaction, the secret values an
// older packrun stored in plaintext (before this version, or since, while
// running beside it on the same home). Nothing is read or created when
// there are none; a partial index (memory_entries_secret) keeps the check
// to the secret entries. The transaction runs with SQLite's secure_delete
// on, which zeroes the plaintext's old cells instead of leaving them in
// free space, and the WAL that held them is truncated afterwards. Free
// pages from values replaced or deleted before the upgrade may still hold
// old text until a VACUUM.
func sealPlaintextSecrets(ctx context.Context, d *sql.DB, k *keyring) error {
	const plain = `FROM memory_entries WHERE secret = 1 AND substr(value, 1, 1) != x'00'`
	var n int
	if err := d.QueryRowContext(ctx, `SELECT COUNT(*) `+plain).Scan(&n); err != nil || n == 0 {
		return err
	}
	if _, err := k.get(ctx, true); err != nil {
		return err
	}
	conn, err := d.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var was string
	if err := conn.QueryRowContext(ctx, `PRAGMA secure_delete`).Scan(&was); err != nil {
		return err
	}
	if was == "2" {
		was = "FAST" // reads back as 2, but "2" would set it ON
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
		return err
	}
	defer conn.ExecContext(ctx, `PRAGMA secure_delete = `+was)
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	type entry struct {
		sc    host.Scope
		key   string
		value []byte
	}
	var todo []entry
	rows, err := tx.QueryContext(ctx, `SELECT tenant, namespace, key, value `+plain)
	if err != nil {
		return err
	}
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.sc.Tenant, &e.sc.Namespace, &e.key, &e.value); err != nil {
			rows.Close()
			return err
		}
		todo = append(todo, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, e := range todo {
		v, err := k.seal(ctx, e.sc, e.key, e.value)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE memory_entries SET value = ? WHERE tenant = ? AND namespace = ? AND key = ?`, v, e.sc.Tenant, e.sc.Namespace, e.key); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`) // best effort: readers may hold old frames
	return nil
}
