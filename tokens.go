package packrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// Token is an API token as stored (never its secret), Scope one of its
// permissions and Principal who a request acts as (see internal/auth).
type (
	Token     = auth.Token
	Scope     = auth.Scope
	Principal = auth.Principal
)

// Scopes lists every scope a token may carry.
var Scopes = auth.Scopes

// ParseScopes reads a comma-separated list of scopes ("invoke,tasks:read").
func ParseScopes(s string) ([]Scope, error) { return auth.ParseScopes(s) }

// TokenSpec describes a token to create.
type TokenSpec struct {
	Tenant string // required: every call made with the token acts for it
	Scopes []Scope
	Name   string        // for people: who or what holds it
	TTL    time.Duration // 0: the token does not expire
}

// CreateToken creates an API token and returns it (the one time its secret
// is shown: only its SHA-256 is stored) with its record.
func (h *Host) CreateToken(ctx context.Context, spec TokenSpec) (string, *Token, error) {
	const op = "create token"
	if len(spec.Scopes) == 0 {
		return "", nil, host.Invalid(op, "scopes", "a token needs at least one scope")
	}
	if spec.TTL < 0 {
		return "", nil, host.Invalid(op, "expires", "must be positive")
	}
	id, secret, hash := auth.NewSecret()
	now := time.Now().UTC()
	t := &Token{ID: id, Name: spec.Name, Tenant: spec.Tenant, Scopes: spec.Scopes, CreatedAt: now, SecretHash: hash}
	if spec.TTL > 0 {
		exp := now.Add(spec.TTL)
		t.ExpiresAt = &exp
	}
	if err := h.store.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// Tokens lists the API tokens, newest first (revoked and expired ones too).
func (h *Host) Tokens(ctx context.Context) ([]*Token, error) { return h.store.Tokens(ctx) }

// RevokeToken revokes a token at once: the next request made with it is
// refused, in this process and in any other serving this home.
func (h *Host) RevokeToken(ctx context.Context, id string) (*Token, error) {
	return h.store.RevokeToken(ctx, id)
}

// HasActiveTokens reports whether any token could authenticate a request
// now (one neither revoked nor expired).
func (h *Host) HasActiveTokens(ctx context.Context) (bool, error) {
	ts, err := h.store.Tokens(ctx)
	if err != nil {
		return false, err
	}
	now := time.Now()
	for _, t := range ts {
		if t.Active(now) {
			return true, nil
		}
	}
	return false, nil
}

// ErrBadToken is returned by Authenticate for a token that is malformed,
// unknown, revoked or expired.
var ErrBadToken = errors.New("the token is not valid")

// Authenticate returns who a presented token acts as. The token's record
// is checked on every call, so a revocation (from any packrun process)
// holds at once; the SQLite store answers from a cache that every token
// write invalidates in every process (internal/store/sqlite tokenCache).
func (h *Host) Authenticate(ctx context.Context, token string) (*Principal, error) {
	id, secret, err := auth.Split(token)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadToken, err)
	}
	t, err := h.store.Token(ctx, id)
	if errors.Is(err, host.ErrNotFound) {
		return nil, fmt.Errorf("%w: unknown token %s", ErrBadToken, id)
	} else if err != nil {
		return nil, err
	}
	if !t.Matches(secret) {
		return nil, fmt.Errorf("%w: wrong secret for token %s", ErrBadToken, id)
	}
	if !t.Active(time.Now()) {
		return nil, fmt.Errorf("%w: token %s is revoked or expired", ErrBadToken, id)
	}
	return t.Principal(), nil
}
