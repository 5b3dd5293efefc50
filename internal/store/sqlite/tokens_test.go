package sqlite

import (
	"testing"
	"time"

	"github.com/packrun/packrun/internal/auth"
)

// TestTokenCacheCoherentAcrossStores: Token answers from its cache, and a
// token revoked through another Store on the same database (another
// packrun process: packrun tokens revoke beside packrun serve) is seen
// revoked by the very next read.
func TestTokenCacheCoherentAcrossStores(t *testing.T) {
	a := newFixture(t, Options{})
	b := a.another(t)
	id, _, hash := auth.NewSecret()
	if err := a.CreateToken(ctx, &auth.Token{ID: id, Name: "n", Tenant: "default", Scopes: []auth.Scope{auth.ScopeInvoke}, SecretHash: hash, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	name := func(step string) string {
		t.Helper()
		tok, err := a.Token(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return tok.Name
	}
	if got := name("first read"); got != "n" {
		t.Fatalf("first read: name %q", got)
	}
	// Cached: a change behind the store's back (raw SQL, no generation
	// bump) is not seen until the cache's max age.
	if _, err := a.db.Exec(`UPDATE api_tokens SET name = 'raw' WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if got := name("raw change"); got != "n" {
		t.Fatalf("raw change: name %q, want the cached n", got)
	}
	// A copy: the caller changing it does not change the cache.
	tok, _ := a.Token(ctx, id)
	tok.Scopes[0], tok.Name = auth.ScopeAdmin, "changed"
	if tok, _ := a.Token(ctx, id); tok.Scopes[0] != auth.ScopeInvoke || tok.Name != "n" {
		t.Fatalf("the cached token changed with its copy: %+v", tok)
	}
	// Revoked through the other store: seen at once.
	if _, err := b.RevokeToken(ctx, id); err != nil {
		t.Fatal(err)
	}
	got, err := a.Token(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil || got.Active(time.Now()) {
		t.Fatalf("token revoked through another store still active here: %+v", got)
	}
	if got.Name != "raw" {
		t.Fatalf("after the revocation: name %q, want the stored raw", got.Name)
	}
}
