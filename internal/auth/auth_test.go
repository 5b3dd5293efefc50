package auth

import "testing"

// Admin stands for every scope but operator, which a token has only by
// name; without authentication a request has every scope.
func TestHas(t *testing.T) {
	admin := &Principal{Tenant: "acme", Scopes: []Scope{ScopeAdmin}}
	for _, s := range Scopes {
		if got, want := admin.Has(s), s != ScopeOperator; got != want {
			t.Errorf("admin has %s: %v, want %v", s, got, want)
		}
	}
	op := &Principal{Tenant: "ops", Scopes: []Scope{ScopeEvidenceRead, ScopeOperator}}
	if !op.Has(ScopeOperator) || !op.Has(ScopeEvidenceRead) || op.Has(ScopeAdmin) || op.Has(ScopeTasksRead) {
		t.Errorf("evidence:read,operator: %+v", op)
	}
	if both := (&Principal{Scopes: []Scope{ScopeAdmin, ScopeOperator}}); !both.Has(ScopeOperator) || !both.Has(ScopeMemoryWrite) {
		t.Error("admin,operator")
	}
	if !(&Principal{Insecure: true}).Has(ScopeOperator) {
		t.Error("without authentication: no operator scope")
	}
	var none *Principal
	if none.Has(ScopeOperator) {
		t.Error("a nil principal has operator")
	}
	if sc, err := ParseScopes("admin, operator"); err != nil || len(sc) != 2 || sc[1] != ScopeOperator {
		t.Errorf("ParseScopes: %v %v", sc, err)
	}
}
