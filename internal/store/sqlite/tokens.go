package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/store/storecore"
)

const tokenColumns = `id, name, tenant, scopes, secret_hash, created_at, expires_at, revoked_at`

func scanToken(row interface{ Scan(...any) error }) (*auth.Token, error) {
	var t auth.Token
	var scopes, created string
	var expires, revoked sql.NullString
	if err := row.Scan(&t.ID, &t.Name, &t.Tenant, &scopes, &t.SecretHash, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	t.Scopes = storecore.TokenScopes(scopes)
	t.CreatedAt = parseTS(created)
	t.ExpiresAt, t.RevokedAt = parseNullTS(expires), parseNullTS(revoked)
	return &t, nil
}

// CreateToken implements auth.Store.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	const op = "create token"
	scopes, err := storecore.CheckToken(op, t)
	if err != nil {
		return err
	}
	var expires any
	if t.ExpiresAt != nil {
		expires = ts(*t.ExpiresAt)
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes) // tokenCache
		_, err := tx.Exec(`INSERT OR FAIL INTO api_tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)`,
			t.ID, t.Name, t.Tenant, scopes, t.SecretHash, ts(t.CreatedAt), expires)
		return err
	})
	return host.Wrap(op, t.ID, err)
}

// tokenCache holds the tokens Token read, by id: every authenticated
// request asks for its token's record. Coherent through the routes
// generation (the store's configuration), which CreateToken and
// RevokeToken touch: a revocation by any packrun process that opens this
// database is seen by the next request (see genCache for the one gap).
// Unknown ids are not cached.
type tokenCache = genCache[string, *auth.Token]

func newTokenCache(g gen) *tokenCache {
	return newGenCache(g, 1<<14, func(string, *auth.Token) int { return 1 })
}

// Token implements auth.Store. Answers come from tokenCache while no
// token was created or revoked; each is a copy the caller may change.
func (s *Store) Token(ctx context.Context, id string) (*auth.Token, error) {
	now := time.Now()
	t, ok, g := s.tokens.lookup(id, now)
	if !ok {
		var err error
		t, err = scanToken(s.queryRow(ctx, `SELECT `+tokenColumns+` FROM api_tokens WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, host.Errorf("get token", id, host.ErrNotFound, "")
		} else if err != nil {
			return nil, host.Wrap("get token", id, err)
		}
		s.tokens.store(id, t, g, now)
	}
	c := *t
	c.Scopes = slices.Clone(t.Scopes)
	return &c, nil
}

// Tokens implements auth.Store.
func (s *Store) Tokens(ctx context.Context) ([]*auth.Token, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM api_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, host.Wrap("list tokens", "", err)
	}
	defer rows.Close()
	var out []*auth.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, host.Wrap("list tokens", "", err)
		}
		out = append(out, t)
	}
	return out, host.Wrap("list tokens", "", rows.Err())
}

// RevokeToken implements auth.Store. Revoking a revoked token keeps its
// first revocation time.
func (s *Store) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	const op = "revoke token"
	var n int64
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes) // tokenCache
		res, err := tx.Exec(`UPDATE api_tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?`, ts(s.now()), id)
		if err == nil {
			n, err = res.RowsAffected()
		}
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

var _ auth.Store = (*Store)(nil)
