package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ auth.Store = (*Store)(nil)

// API tokens (auth.Store), as internal/store/sqlite's: every node authenticates
// against the same rows, so a token revoked on one node is refused by all.

// CreateToken implements auth.Store. An id taken already is refused.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	const op = "create token"
	scopes, err := storecore.CheckToken(op, t)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(x *tx) error { return storecore.CreateToken(ctx, coreTx{x}, t, scopes) })
	return host.Wrap(op, t.ID, err)
}

// Token implements auth.Store.
func (s *Store) Token(ctx context.Context, id string) (*auth.Token, error) {
	return storecore.LoadToken(ctx, corePool{s.pool}, "get token", id)
}

// Tokens implements auth.Store: newest first.
func (s *Store) Tokens(ctx context.Context) ([]*auth.Token, error) {
	out, err := storecore.ListTokens(ctx, corePool{s.pool})
	return out, host.Wrap("list tokens", "", err)
}

// RevokeToken implements auth.Store. Revoking a revoked token keeps its
// first revocation time.
func (s *Store) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	const op = "revoke token"
	err := s.write(ctx, func(x *tx) error { return storecore.RevokeToken(ctx, coreTx{x}, op, id, s.now()) })
	if err != nil {
		return nil, host.Wrap(op, id, err)
	}
	return s.Token(ctx, id)
}

// HostPublicKey is the public half (hex) of this node's host key
// (Options.HostKey), "" if it has none. Unlike internal/store/sqlite, the store
// does not create a key: each node is given its own, or all one.
func (s *Store) HostPublicKey() (string, error) {
	if len(s.opts.HostKey) != ed25519.PrivateKeySize {
		return "", nil
	}
	return hex.EncodeToString(s.opts.HostKey.Public().(ed25519.PublicKey)), nil
}

// SealDigest seals the digest of an exported file of the given kind (an
// evidence bundle, a trace) with this node's host key (Options.HostKey);
// without one it fails.
func (s *Store) SealDigest(kind, digest string) (*host.Seal, error) {
	if len(s.opts.HostKey) != ed25519.PrivateKeySize {
		return nil, errNoHostKey
	}
	return evidence.SealDigest(s.opts.HostKey, kind, digest), nil
}
