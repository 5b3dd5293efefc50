package api

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/packrun/packrun/internal/api/openapitest"
)

// apiSpec is the OpenAPI document, parsed and validated once for every
// test that checks responses against it (newEnv).
var apiSpec = sync.OnceValues(func() (*openapitest.Checker, error) {
	b, err := OpenAPI()
	if err != nil {
		return nil, err
	}
	return openapitest.Load(b, "ErrorBody|OpenwopErrorBody", "/v1/", "/.well-known/")
})

func specFor(t *testing.T) *openapitest.Checker {
	t.Helper()
	c, err := apiSpec()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The document is a valid OpenAPI 3.1 document (kin-openapi's loader and
// validator, JSON Schema 2020-12).
func TestOpenAPIDocumentValid(t *testing.T) {
	doc := specFor(t).Doc()
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi: %q", doc.OpenAPI)
	}
	for _, name := range []string{"cursor", "limit", "after"} {
		if doc.Components.Parameters[name] == nil {
			t.Errorf("no shared parameter %s", name)
		}
	}
	if p := doc.Components.Parameters["after"]; p != nil && !p.Value.Deprecated {
		t.Errorf("after is not deprecated")
	}
}

// Every route New registers is described (method and path template), with
// the scope and query parameters its handler enforces and the error
// envelope for its refusals, and the document describes no route that
// does not exist.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := specFor(t).Doc()
	s, _ := build(Config{})
	want := map[string]bool{}
	for _, rt := range s.routes {
		method, pattern, _ := strings.Cut(rt, " ")
		p := docPath(pattern)
		want[method+" "+p] = true
		item := doc.Paths.Value(p)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s is not described", rt)
			continue
		}
		o := item.GetOperation(method)
		meta := s.meta[rt]
		var scopes []string
		if o.Security != nil {
			for _, req := range *o.Security {
				scopes = append(scopes, req["bearer"]...)
			}
		}
		switch {
		case publicRoutes[rt]:
			if o.Security == nil || len(*o.Security) != 0 {
				t.Errorf("%s: served without a token, yet its security is %v", rt, o.Security)
			}
		case meta.scope == "" && len(scopes) != 0, meta.scope != "" && !slices.Equal(scopes, []string{string(meta.scope)}):
			t.Errorf("%s: needs scope %q, described as %v", rt, meta.scope, scopes)
		}
		var query []string
		for _, p := range o.Parameters {
			if p.Value.In == "query" {
				query = append(query, p.Value.Name)
			}
		}
		if !slices.Equal(query, meta.params) {
			t.Errorf("%s: takes query parameters %v, described as %v", rt, meta.params, query)
		}
		for _, st := range []string{"400", "401", "403", "429", "500"} {
			r := o.Responses.Value(st)
			if r == nil || r.Value.Content.Get("application/json") == nil {
				t.Errorf("%s: no %s error envelope", rt, st)
			}
		}
	}
	for p, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !want[method+" "+p] {
				t.Errorf("the document describes %s %s, which is not a route", method, p)
			}
		}
	}
}

// GET /v1/openapi.json serves the document to anyone, without a token and
// with a Cache-Control header; other methods still need a token.
func TestOpenAPIServedWithoutToken(t *testing.T) {
	e := newEnv(t, newBackend(t), func(c *Config) { c.Auth = Auth{} })
	want, err := OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	r := e.do("GET", "/v1/openapi.json", "", "")
	if r.status != http.StatusOK || string(r.body) != string(want) {
		t.Fatalf("GET /v1/openapi.json: %d %.200s", r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") {
		t.Errorf("Cache-Control: %q", cc)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type: %q", ct)
	}
	if r := e.do("HEAD", "/v1/openapi.json", "", ""); r.status != http.StatusOK {
		t.Errorf("HEAD: %d", r.status)
	}
	if r := e.do("GET", "/v1/openapi.json?x=1", "", ""); r.status != http.StatusBadRequest {
		t.Errorf("unknown query parameter: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/openapi.json", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("POST without a token: %d %s", r.status, r.body)
	}
	// Every other route still needs one.
	if r := e.do("GET", "/v1/packs", "", ""); r.status != http.StatusUnauthorized {
		t.Errorf("GET /v1/packs without a token: %d %s", r.status, r.body)
	}
}

// The checker the API tests run every response through refuses what the
// document does not describe: a field no schema has, a wrong type, a
// status the operation does not answer, a refusal that is not the error
// envelope.
func TestOpenAPICheckerRefuses(t *testing.T) {
	c := specFor(t)
	get := func(path string) *http.Request {
		r, err := http.NewRequest("GET", "http://127.0.0.1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		path   string
		status int
		body   string
		ok     bool
	}{
		{"/v1/packs", 200, `{"packs":[]}`, true},
		{"/v1/packs", 200, `{"packs":[],"extra":1}`, false},
		{"/v1/packs", 200, `{"packs":[{"name":5}]}`, false},
		{"/v1/packs", 418, `{"error":{"code":"x","message":"y"}}`, false},
		{"/v1/tasks/t1", 404, `{"error":{"code":"not_found","message":"no task"}}`, true},
		{"/v1/tasks/t1", 404, `{"message":"no task"}`, false},
		{"/v1/no-such-route", 404, `{"error":{"code":"not_found","message":"no route"}}`, true},
		{"/v1/no-such-route", 404, `not found`, false},
		{"/v1/no-such-route", 200, `{}`, false},
	} {
		err := c.Check(get(tc.path), tc.status, h, []byte(tc.body))
		if (err == nil) != tc.ok {
			t.Errorf("%s %d %s: %v", tc.path, tc.status, tc.body, err)
		}
	}
}
