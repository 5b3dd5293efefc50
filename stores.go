package packrun

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/postgres"
	"github.com/packrun/packrun/internal/store/storecore"
)

// StoreEnv names the environment variable Open reads for Config.Store
// when it is empty.
const StoreEnv = "PACKRUN_STORE"

var _ backend = (*postgres.Store)(nil)

func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL is a store URL fit for an error message: its password left out.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unreadable URL)"
	}
	return u.Redacted()
}

// openPostgres opens the PostgreSQL store at cfg.Store. The keys the
// SQLite store keeps beside its database come from the home's key files
// (made, 0600, if missing): the secret key sealing secret memory values,
// which every node of one database must share, and this node's host key,
// which seals exports and signs the evidence head checkpoint this node
// writes in its home (evidence-head.json, the name SQLite's has there: a
// home moved with MigrateStore keeps its anchor, the chain's seqs and
// hashes being the same).
func openPostgres(ctx context.Context, home string, cfg Config, q host.StoreQuotas, logKey *tlog.Signer) (backend, error) {
	secretFile := cfg.SecretKeyFile
	if secretFile == "" {
		secretFile = filepath.Join(home, "secret.key")
	}
	secret, err := hexKeyFile(secretFile, storecore.SecretKeyLen)
	if err != nil {
		return nil, fmt.Errorf("%w: secret key: %v", ErrConfig, err)
	}
	hostFile := cfg.HostKeyFile
	if hostFile == "" {
		hostFile = filepath.Join(home, "host.key")
	}
	checkpoint := filepath.Join(home, "evidence-head.json")
	if !cfg.reanchor {
		// A node whose home holds a checkpoint has anchored with its key:
		// a missing key is a lost anchor, not a new node (no key is made).
		if _, err := os.Stat(hostFile); errors.Is(err, fs.ErrNotExist) {
			if cp, cerr := evidence.ReadCheckpoint(checkpoint); cerr == nil {
				return nil, &evidence.UnanchoredError{File: hostFile,
					Detail: fmt.Sprintf("the host key %s is missing, but this node's evidence checkpoint %s is signed by key %.16s…", hostFile, checkpoint, cp.PublicKey)}
			}
		}
	}
	seed, err := hexKeyFile(hostFile, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("%w: host key: %v", ErrConfig, err)
	}
	s, err := postgres.Open(ctx, cfg.Store, postgres.Options{SecretKey: secret, HostKey: ed25519.NewKeyFromSeed(seed), LeaseTTL: cfg.LeaseTTL,
		CheckpointFile: checkpoint, Reanchor: cfg.reanchor, Quotas: q, LogSigner: logKey})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", redactURL(cfg.Store), err)
	}
	return s, nil
}

// hexKeyFile reads a key of n bytes written as hex digits (the format of
// the SQLite store's secret.key and host.key), creating it with random
// bytes, 0600, if it does not exist. Two processes creating it at once
// end up with the same key: the file is created exclusively and the loser
// reads the winner's.
func hexKeyFile(path string, n int) ([]byte, error) {
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			key, err := hex.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(key) != n {
				return nil, fmt.Errorf("%s is not a packrun key (want %d hex digits)", path, 2*n)
			}
			return key, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		key := make([]byte, n)
		rand.Read(key)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it: read theirs
		}
		if err != nil {
			return nil, err
		}
		_, err = f.WriteString(hex.EncodeToString(key) + "\n")
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, err
		}
		return key, nil
	}
	return nil, fmt.Errorf("%s: created and removed while being read", path)
}
