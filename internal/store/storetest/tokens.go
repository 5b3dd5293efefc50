package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// Tokens checks auth.Store, which both stores implement beside
// host.Backend: a token reads back as created, an id is taken once, the
// listing is newest first, and a revocation keeps its first time.
func Tokens(t *testing.T, open Opener) {
	runAll(t, open, []scenario{
		{"RoundTrip", tokensRoundTrip},
		{"Revoke", tokensRevoke},
	})
}

func (f *fixture) tokens() auth.Store {
	f.t.Helper()
	s, ok := f.b.(auth.Store)
	if !ok {
		f.t.Fatalf("%T does not implement auth.Store", f.b)
	}
	return s
}

func tokensRoundTrip(f *fixture) {
	s := f.tokens()
	created := f.clock.Now().UTC().Truncate(time.Millisecond)
	expires := created.Add(time.Hour)
	a := &auth.Token{ID: "tok_a", Name: "ci", Tenant: "acme", Scopes: []auth.Scope{auth.ScopeTasksRead, auth.ScopeMemoryWrite},
		CreatedAt: created, ExpiresAt: &expires, SecretHash: "aa"}
	b := &auth.Token{ID: "tok_b", Tenant: "default", Scopes: []auth.Scope{auth.ScopeInvoke}, CreatedAt: created.Add(time.Second), SecretHash: "bb"}
	for _, tok := range []*auth.Token{a, b} {
		if err := s.CreateToken(ctx, tok); err != nil {
			f.t.Fatalf("CreateToken %s: %v", tok.ID, err)
		}
	}
	if err := s.CreateToken(ctx, &auth.Token{ID: "tok_a", Tenant: "acme", CreatedAt: created, SecretHash: "cc"}); err == nil {
		f.t.Fatalf("CreateToken of a taken id: no error")
	}
	got, err := s.Token(ctx, "tok_a")
	if err != nil {
		f.t.Fatalf("Token: %v", err)
	}
	if !got.CreatedAt.Equal(created) || got.ExpiresAt == nil || !got.ExpiresAt.Equal(expires) || got.RevokedAt != nil {
		f.t.Fatalf("Token times: created %v expires %v revoked %v; want %v, %v, nil", got.CreatedAt, got.ExpiresAt, got.RevokedAt, created, expires)
	}
	got.CreatedAt, got.ExpiresAt = a.CreatedAt, a.ExpiresAt
	if !reflect.DeepEqual(got, a) {
		f.t.Fatalf("Token = %+v, want %+v", got, a)
	}
	if _, err := s.Token(ctx, "tok_none"); !errors.Is(err, host.ErrNotFound) {
		f.t.Fatalf("Token of an unknown id: %v, want ErrNotFound", err)
	}
	all, err := s.Tokens(ctx)
	if err != nil {
		f.t.Fatalf("Tokens: %v", err)
	}
	if len(all) != 2 || all[0].ID != "tok_b" || all[1].ID != "tok_a" {
		f.t.Fatalf("Tokens: %d tokens, want tok_b then tok_a", len(all))
	}
}

func tokensRevoke(f *fixture) {
	s := f.tokens()
	if err := s.CreateToken(ctx, &auth.Token{ID: "tok_r", Tenant: "acme", CreatedAt: f.clock.Now(), SecretHash: "aa"}); err != nil {
		f.t.Fatalf("CreateToken: %v", err)
	}
	first := f.clock.Now().UTC().Truncate(time.Millisecond)
	got, err := s.RevokeToken(ctx, "tok_r")
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(first) {
		f.t.Fatalf("RevokeToken = %+v, %v; want revoked at %v", got, err, first)
	}
	f.clock.Add(time.Minute)
	if got, err = s.RevokeToken(ctx, "tok_r"); err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(first) {
		f.t.Fatalf("RevokeToken again = %+v, %v; want the first time %v kept", got, err, first)
	}
	if _, err := s.RevokeToken(ctx, "tok_none"); !errors.Is(err, host.ErrNotFound) {
		f.t.Fatalf("RevokeToken of an unknown id: %v, want ErrNotFound", err)
	}
}
