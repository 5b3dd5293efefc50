package sqlite

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// Secret memory values (host.PutOptions.Secret) are sealed at rest with
// AES-256-GCM (storecore.SecretKey, the format both backends share, so
// `store migrate` copies sealed values as they are) under a key kept in a
// file apart from the database (Options.SecretKeyFile), so a copy of
// packrun.db, its WAL or a backup of it does not hold them in clear. Other
// values stay plaintext.
//
// Get opens a sealed value and caches the plaintext in memory only (the
// read cache, memCache), so a repeated read pays no cryptography. A secret
// value without the marker was stored by an older packrun: it reads as it
// is, and the next Open seals it (sealPlaintextSecrets).

// SecretKeyEnv names the environment variable the CLI reads for
// Options.SecretKeyFile; error messages point operators at it.
const SecretKeyEnv = storecore.SecretKeyFileEnv

func sealed(v []byte) bool { return storecore.Sealed(v) }

// keyring reads the key file at the first need and keeps the key for the
// life of the Store. A failed read is not kept: restoring the file mends
// the next call.
type keyring struct {
	path string
	db   *sql.DB
	mu   sync.Mutex
	key  *storecore.SecretKey
}

// get returns the key. With create, a missing key file is created, unless
// the store holds values sealed with some key already: a new key could
// never open them, so the file has been lost or is looked for elsewhere.
func (k *keyring) get(ctx context.Context, create bool) (*storecore.SecretKey, error) {
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
				ErrSecretKey, k.path, n, storecore.SealKeyID(first), SecretKeyEnv)
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
func readKeyFile(path string) (*storecore.SecretKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSecretKey, err)
	}
	raw, err := hex.DecodeString(string(bytes.TrimSpace(b)))
	if err != nil || len(raw) != storecore.SecretKeyLen {
		return nil, fmt.Errorf("%w %s is not a packrun secret key (want %d hex digits, as from `openssl rand -hex %d`): restore it from your backup", ErrSecretKey, path, 2*storecore.SecretKeyLen, storecore.SecretKeyLen)
	}
	return storecore.NewSecretKeyFile(raw, path)
}

// createKeyFile writes a new random key to path, 0600, atomically and
// exclusively: the key goes to a temporary file (created O_EXCL), which is
// synced and then linked to path; a link fails if path exists. If another
// process created path first, its key is the one read.
func createKeyFile(path string) (*storecore.SecretKey, error) {
	raw := make([]byte, storecore.SecretKeyLen)
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
		_ = d.Sync() // best effort: the key file itself was synced
		d.Close()
	}
	return storecore.NewSecretKeyFile(raw, path)
}

// seal returns the sealed form of an entry's value, creating the key file
// if this is the first secret.
func (k *keyring) seal(ctx context.Context, sc host.Scope, key string, value []byte) ([]byte, error) {
	sk, err := k.get(ctx, true)
	if err != nil {
		return nil, err
	}
	return sk.Seal(sc, key, value), nil
}

// open returns the plaintext of an entry's sealed value; a value of an
// unknown format is refused before the key file is read.
func (k *keyring) open(ctx context.Context, sc host.Scope, key string, v []byte) ([]byte, error) {
	if err := storecore.CheckSealFormat(v); err != nil {
		return nil, err
	}
	sk, err := k.get(ctx, false)
	if err != nil {
		return nil, err
	}
	return sk.Open(sc, key, v)
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
	// Best effort: left ON, it only costs this pooled connection speed.
	defer func() { _, _ = conn.ExecContext(ctx, `PRAGMA secure_delete = `+was) }()
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
	_, _ = conn.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`) // best effort: readers may hold old frames
	return nil
}
