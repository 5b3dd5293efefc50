package postgres

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/evidence"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ auth.Store = (*Store)(nil)

// API tokens (auth.Store), as internal/store/sqlite's: every node authenticates
// against the same rows, so a token revoked on one node is refused by all.

const tokenColumns = `id, name, tenant, scopes, secret_hash, created_at, expires_at, revoked_at`

func scanToken(row pgx.Row) (*auth.Token, error) {
	var t auth.Token
	var scopes, created string
	var expires, revoked *string
	if err := row.Scan(&t.ID, &t.Name, &t.Tenant, &scopes, &t.SecretHash, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	t.Scopes = storecore.TokenScopes(scopes)
	t.CreatedAt = parseTS(created)
	t.ExpiresAt, t.RevokedAt = parseNullTS(expires), parseNullTS(revoked)
	return &t, nil
}

// CreateToken implements auth.Store. An id taken already is refused.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	const op = "create token"
	scopes, err := storecore.CheckToken(op, t)
	if err != nil {
		return err
	}
	var expires *string
	if t.ExpiresAt != nil {
		e := ts(*t.ExpiresAt)
		expires = &e
	}
	err = s.write(ctx, func(x *tx) error {
		_, err := x.Exec(ctx, `INSERT INTO api_tokens (`+tokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
			t.ID, t.Name, t.Tenant, scopes, t.SecretHash, ts(t.CreatedAt), expires)
		return err
	})
	return host.Wrap(op, t.ID, err)
}

// Token implements auth.Store.
func (s *Store) Token(ctx context.Context, id string) (*auth.Token, error) {
	t, err := scanToken(s.pool.QueryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf("get token", id, host.ErrNotFound, "")
	}
	return t, host.Wrap("get token", id, err)
}

// Tokens implements auth.Store: newest first.
func (s *Store) Tokens(ctx context.Context) ([]*auth.Token, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, host.Wrap("list tokens", "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*auth.Token, error) { return scanToken(r) })
	return out, host.Wrap("list tokens", "", err)
}

// RevokeToken implements auth.Store. Revoking a revoked token keeps its
// first revocation time.
func (s *Store) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	const op = "revoke token"
	var n int64
	err := s.write(ctx, func(x *tx) error {
		tag, err := x.Exec(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`, ts(s.now()), id)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, id, err)
	}
	if n == 0 {
		return nil, host.Errorf(op, id, host.ErrNotFound, "no token %s", id)
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
