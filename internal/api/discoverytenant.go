package api

import (
	"net/http"
	"slices"
)

// discoveryPrivateCacheControl is discovery's Cache-Control when the
// answer lists a tenant's registered definitions.
const discoveryPrivateCacheControl = "private, max-age=60"

// discoveryTenant is the tenant of the bearer token a discovery request
// carries, when it carries a valid one. Discovery is served without a
// token; one that is not valid is ignored (the public answer).
func (s *server) discoveryTenant(r *http.Request) (string, bool) {
	if r.Header.Get("Authorization") == "" {
		return "", false
	}
	p, err := s.authenticate(r)
	if err != nil {
		return "", false
	}
	return p.Tenant, true
}

// appendNew appends to a the elements of b it does not hold.
func appendNew(a, b []string) []string {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	return a
}
