package sqlite

import (
	"context"
	"slices"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/store/storecore"
)

// CreateToken implements auth.Store.
func (s *Store) CreateToken(ctx context.Context, t *auth.Token) error {
	const op = "create token"
	scopes, err := storecore.CheckToken(op, t)
	if err != nil {
		return err
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes) // tokenCache
		return storecore.CreateToken(ctx, coreTx{s, tx}, t, scopes)
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
		if t, err = storecore.LoadToken(ctx, coreDB{s}, "get token", id); err != nil {
			return nil, err
		}
		s.tokens.store(id, t, g, now)
	}
	c := *t
	c.Scopes = slices.Clone(t.Scopes)
	return &c, nil
}

// Tokens implements auth.Store.
func (s *Store) Tokens(ctx context.Context) ([]*auth.Token, error) {
	out, err := storecore.ListTokens(ctx, coreDB{s})
	return out, host.Wrap("list tokens", "", err)
}

// RevokeToken implements auth.Store. Revoking a revoked token keeps its
// first revocation time.
func (s *Store) RevokeToken(ctx context.Context, id string) (*auth.Token, error) {
	const op = "revoke token"
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes) // tokenCache
		return storecore.RevokeToken(ctx, coreTx{s, tx}, op, id, s.now())
	})
	if err != nil {
		return nil, host.Wrap(op, id, err)
	}
	return s.Token(ctx, id)
}

var _ auth.Store = (*Store)(nil)
