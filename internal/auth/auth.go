// Package auth is who a request acts as: API tokens, their tenant and
// scopes, and the checks every route makes with them.
//
// A token is "prt_" + its id + "_" + a secret. The id is public (it names
// the token in lists, logs and runtime events); only the SHA-256 of the
// secret is stored, so a stolen database does not hold usable tokens.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scope is one permission a token carries.
type Scope string

// The scopes. Admin implies every other one but operator.
const (
	ScopeInvoke        Scope = "invoke"         // POST /v1/invoke
	ScopeTasksWrite    Scope = "tasks:write"    // enqueue, cancel, retry, resume
	ScopeTasksRead     Scope = "tasks:read"     // tasks
	ScopeMemoryRead    Scope = "memory:read"    // the tenant's memory
	ScopeMemoryWrite   Scope = "memory:write"   // write the tenant's memory
	ScopeEvidenceRead  Scope = "evidence:read"  // attempts, artifacts, events, replays, the chain's status
	ScopeMessagesRead  Scope = "messages:read"  // the tenant's agent messages (GET /v1/messages)
	ScopeMessagesWrite Scope = "messages:write" // publish agent messages (POST /v1/messages)
	ScopePacksAdmin    Scope = "packs:admin"    // install and remove packs
	ScopeAdmin         Scope = "admin"          // every scope of the tenant (all but operator)
	// ScopeOperator reaches past the token's tenant: GET /v1/events lists
	// every tenant's runtime events and those of no tenant (dispatch_*,
	// task types, ...). Admin does not imply it; a token has it only
	// when it was created with it by name.
	ScopeOperator Scope = "operator"
)

// Scopes lists every scope, in the order help texts show them.
var Scopes = []Scope{ScopeInvoke, ScopeTasksWrite, ScopeTasksRead, ScopeMemoryRead, ScopeMemoryWrite, ScopeEvidenceRead, ScopeMessagesRead, ScopeMessagesWrite, ScopePacksAdmin, ScopeAdmin, ScopeOperator}

// ParseScopes reads a comma-separated list of scopes, refusing an unknown
// one by name.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !slices.Contains(Scopes, Scope(f)) {
			names := make([]string, len(Scopes))
			for i, sc := range Scopes {
				names[i] = string(sc)
			}
			return nil, fmt.Errorf("unknown scope %q; the scopes are %s", f, strings.Join(names, ", "))
		}
		if !slices.Contains(out, Scope(f)) {
			out = append(out, Scope(f))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scope given; a token needs at least one")
	}
	return out, nil
}

// Principal is who a request acts as.
type Principal struct {
	// TokenID names the token ("" when the server runs without
	// authentication).
	TokenID string
	// Name is the token's name, for people.
	Name string
	// Tenant is the tenant every read and write of the request is bound
	// to; the request body never chooses it.
	Tenant string
	Scopes []Scope
	// Insecure is set when the server runs with --insecure-no-auth: every
	// scope, and the tenant a request names is taken as given.
	Insecure bool
}

// Has reports whether p may act with scope s. Admin stands for every scope
// but operator, which a token has only by name (without authentication,
// every scope).
func (p *Principal) Has(s Scope) bool {
	return p != nil && (p.Insecure || slices.Contains(p.Scopes, s) || s != ScopeOperator && slices.Contains(p.Scopes, ScopeAdmin))
}

type principalKey struct{}

// With returns ctx carrying p.
func With(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// From returns the principal ctx carries, or nil.
func From(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Token is a stored token: everything but its secret.
type Token struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Tenant    string     `json:"tenant"`
	Scopes    []Scope    `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// SecretHash is the hex SHA-256 of the secret.
	SecretHash string `json:"-"`
}

// Active reports whether t may be used at now.
func (t *Token) Active(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// Principal is the principal t makes a request act as.
func (t *Token) Principal() *Principal {
	return &Principal{TokenID: t.ID, Name: t.Name, Tenant: t.Tenant, Scopes: t.Scopes}
}

const tokenPrefix = "prt_"

// NewSecret makes a token's id and secret and the string a client
// presents; only hash (the hex SHA-256 of secret) is to be stored.
func NewSecret() (id, token, hash string) {
	var idb [6]byte
	var sec [32]byte
	rand.Read(idb[:])
	rand.Read(sec[:])
	id = hex.EncodeToString(idb[:])
	secret := base64.RawURLEncoding.EncodeToString(sec[:])
	return id, tokenPrefix + id + "_" + secret, HashSecret(secret)
}

// HashSecret is what is stored of a secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ErrMalformed is returned by Split for a string that is not a token.
var ErrMalformed = errors.New("not a packrun token (they look like prt_<id>_<secret>)")

// Split reads a presented token into its id and secret.
func Split(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return "", "", ErrMalformed
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != 12 || len(secret) < 16 || len(secret) > 64 {
		return "", "", ErrMalformed
	}
	return id, secret, nil
}

// Matches reports whether secret is the one t was created with, in
// constant time.
func (t *Token) Matches(secret string) bool {
	return subtle.ConstantTimeCompare([]byte(HashSecret(secret)), []byte(t.SecretHash)) == 1
}

// Store keeps tokens.
type Store interface {
	// CreateToken stores t (its ID, SecretHash, tenant, scopes, expiry).
	CreateToken(ctx context.Context, t *Token) error
	// Token returns a token by id (host.ErrNotFound if none).
	Token(ctx context.Context, id string) (*Token, error)
	// Tokens lists every token, newest first.
	Tokens(ctx context.Context) ([]*Token, error)
	// RevokeToken marks a token revoked (host.ErrNotFound if none); a
	// revoked token stays listed.
	RevokeToken(ctx context.Context, id string) (*Token, error)
}

// Note is what the handler serving a request learns for the middleware
// around it (request logs and metrics): who the request acted as and the
// route it matched, both known only once the request has been routed
// inside (where the request is a copy the middleware never sees).
type Note struct {
	Principal *Principal
	Route     string // the ServeMux pattern, e.g. "GET /v1/tasks/{id}"
}

type noteKey struct{}

// WithNote returns ctx carrying an empty Note for the handlers below to
// fill in.
func WithNote(ctx context.Context) (context.Context, *Note) {
	n := &Note{}
	return context.WithValue(ctx, noteKey{}, n), n
}

// NoteFrom returns the Note ctx carries, or nil.
func NoteFrom(ctx context.Context) *Note {
	n, _ := ctx.Value(noteKey{}).(*Note)
	return n
}
