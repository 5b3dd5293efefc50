package storecore

import (
	"context"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// The API-token rules of auth.Store, written once against Tx.

// TokenColumns are the columns of an api_tokens row, as ScanToken reads
// them.
const TokenColumns = `id, name, tenant, scopes, secret_hash, created_at, expires_at, revoked_at`

// ScanToken reads an api_tokens row (TokenColumns).
func ScanToken(row Row) (*auth.Token, error) {
	var t auth.Token
	var scopes, created string
	var expires, revoked *string
	if err := row.Scan(&t.ID, &t.Name, &t.Tenant, &scopes, &t.SecretHash, &created, &expires, &revoked); err != nil {
		return nil, err
	}
	t.Scopes = TokenScopes(scopes)
	t.CreatedAt = ParseTime(created)
	t.ExpiresAt, t.RevokedAt = parseNullTime(expires), parseNullTime(revoked)
	return &t, nil
}

func parseNullTime(v *string) *time.Time {
	if v == nil {
		return nil
	}
	t := ParseTime(*v)
	return &t
}

// CreateToken stores t (checked by CheckToken, its scopes as it encoded
// them); an id taken already is refused.
func CreateToken(ctx context.Context, tx Tx, t *auth.Token, scopes string) error {
	var expires *string
	if t.ExpiresAt != nil {
		e := host.FormatTime(*t.ExpiresAt)
		expires = &e
	}
	_, err := tx.Exec(ctx, `INSERT INTO api_tokens (`+TokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL)`,
		t.ID, t.Name, t.Tenant, scopes, t.SecretHash, host.FormatTime(t.CreatedAt), expires)
	return err
}

// LoadToken reads the token id (errors under op; none is ErrNotFound).
func LoadToken(ctx context.Context, q Querier, op, id string) (*auth.Token, error) {
	t, err := ScanToken(q.QueryRow(ctx, `SELECT `+TokenColumns+` FROM api_tokens WHERE id = $1`, id))
	if errors.Is(err, ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return t, host.Wrap(op, id, err)
}

// ListTokens lists the tokens, newest first.
func ListTokens(ctx context.Context, q Querier) ([]*auth.Token, error) {
	rows, err := q.Query(ctx, `SELECT `+TokenColumns+` FROM api_tokens ORDER BY created_at DESC, id`)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, ScanToken)
}

// RevokeToken revokes the token id (errors under op; none is
// ErrNotFound). Revoking a revoked token keeps its first revocation time.
func RevokeToken(ctx context.Context, tx Tx, op, id string, now time.Time) error {
	n, err := tx.Exec(ctx, `UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2`, host.FormatTime(now), id)
	if err == nil && n == 0 {
		return host.Errorf(op, id, host.ErrNotFound, "no token %s", id)
	}
	return err
}
