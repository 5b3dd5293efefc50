package packrun

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storecore"
)

// LogKeyEnv names the environment variable Open reads for
// Config.LogKeyFile when it is empty.
const LogKeyEnv = "PACKRUN_LOG_KEY_FILE"

// maxLogKeyFile bounds what readLogKey reads of a log key file (a key is
// 64 hex digits and a newline).
const maxLogKeyFile = 4 << 10

// logSigner is the signer of Config.LogKeyFile under Config.LogOrigin
// (default storecore.LogOrigin of the key, one name per key and so per
// cluster); nil when neither is set.
func logSigner(cfg Config) (*tlog.Signer, error) {
	if cfg.LogKeyFile == "" {
		if cfg.LogOrigin != "" {
			return nil, fmt.Errorf("%w: log origin %q given without a log key file (--log-key): the origin names a key", ErrConfig, cfg.LogOrigin)
		}
		return nil, nil
	}
	key, err := readLogKey(cfg.LogKeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	origin := cfg.LogOrigin
	if origin == "" {
		origin = storecore.LogOrigin(key.Public().(ed25519.PublicKey))
	}
	s, err := tlog.NewSigner(origin, key)
	if err != nil {
		return nil, fmt.Errorf("%w: log origin: %v", ErrConfig, err)
	}
	return s, nil
}

// readLogKey reads the log key file at path: an Ed25519 seed written as
// 64 hex digits (host.key's format), readable by its owner only. Unlike
// the home's own keys it is never created: a cluster's nodes must be
// given one key, so a missing file is an operator's mistake to report,
// not a new key to make.
func readLogKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("log key %s: no such file (make it once, 64 hex digits, and give every node a copy)", path)
	case err != nil:
		return nil, fmt.Errorf("log key %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("log key %s: not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("log key %s: mode %04o lets others read it (chmod 600 %s)", path, fi.Mode().Perm(), path)
	case fi.Size() > maxLogKeyFile:
		return nil, fmt.Errorf("log key %s: %d bytes, not a packrun log key (want 64 hex digits)", path, fi.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("log key %s: %w", path, err)
	}
	key, err := parseLogKey(b)
	if err != nil {
		return nil, fmt.Errorf("log key %s: %v", path, err)
	}
	return key, nil
}

// parseLogKey decodes a log key file's bytes: 64 hex digits (an Ed25519
// seed), surrounding white space allowed.
func parseLogKey(b []byte) (ed25519.PrivateKey, error) {
	s := strings.TrimSpace(string(b))
	seed, err := hex.DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("not a packrun log key (want %d hex digits, an Ed25519 seed)", 2*ed25519.SeedSize)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}
