package openapitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// Checker validates responses against one OpenAPI document; it is safe
// for concurrent use, by several tests.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
	// unrouted are the schemas of an answer to a path or method the
	// document has no operation for (404, 405): the error envelopes.
	unrouted []*openapi3.SchemaRef
	prefixes []string

	mu      sync.Mutex
	checked map[string]int // "METHOD path status" -> responses checked
}

// Load parses and validates doc (an OpenAPI 3.1 document in JSON), whose
// components.schemas[envelope] is the body of any refusal of a route it
// does not describe (envelope may name several, "A|B": one of them); the paths under prefixes are the API's (others, such
// as a console served beside it, are not checked).
func Load(doc []byte, envelope string, prefixes ...string) (*Checker, error) {
	// A server-sent event stream is checked as text.
	openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.PlainBodyDecoder)
	loader := openapi3.NewLoader()
	d, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := d.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	if !d.IsOpenAPI31OrLater() || d.IsOpenAPI32OrLater() {
		return nil, fmt.Errorf("the OpenAPI document is %s, not 3.1", d.OpenAPI)
	}
	r, err := gorillamux.NewRouter(d)
	if err != nil {
		return nil, err
	}
	var envs []*openapi3.SchemaRef
	for _, name := range strings.Split(envelope, "|") {
		env := d.Components.Schemas[name]
		if env == nil {
			return nil, fmt.Errorf("the OpenAPI document has no schema %s", name)
		}
		envs = append(envs, env)
	}
	return &Checker{doc: d, router: r, unrouted: envs, prefixes: prefixes, checked: map[string]int{}}, nil
}

// Doc is the parsed document.
func (c *Checker) Doc() *openapi3.T { return c.doc }

// Handler serves next and checks each of its responses: one that is not
// as the document says fails t.
func (c *Checker) Handler(t testing.TB, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w}
		next.ServeHTTP(rec, r)
		if err := c.Check(r, rec.status(), w.Header(), rec.body.Bytes()); err != nil {
			t.Errorf("%s %s answered %d, not as the OpenAPI document says: %s\nbody: %s", r.Method, r.URL, rec.status(), clip([]byte(err.Error()), 1500), clip(rec.body.Bytes(), 600))
		}
	})
}

// Check validates one response to r.
func (c *Checker) Check(r *http.Request, status int, header http.Header, body []byte) error {
	if !c.isAPI(r.URL.Path) || r.Method == http.MethodHead {
		return nil
	}
	route, params, err := c.router.FindRoute(r)
	if err != nil {
		// No operation: a refusal before routing (404, 405, 401...),
		// whose body is the error envelope.
		if status < 400 {
			return fmt.Errorf("the document has no operation %s %s (%v)", r.Method, r.URL.Path, err)
		}
		return c.unroutedBody(body)
	}
	c.mu.Lock()
	c.checked[route.Method+" "+route.Path+" "+fmt.Sprint(status)]++
	c.mu.Unlock()
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	return openapi3filter.ValidateResponse(context.Background(), in)
}

// Checked counts the responses checked, by "METHOD path status".
func (c *Checker) Checked() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.checked))
	for k, v := range c.checked {
		out[k] = v
	}
	return out
}

func (c *Checker) unroutedBody(body []byte) error {
	v, err := decodeJSON(body)
	if err != nil {
		return err
	}
	for _, env := range c.unrouted {
		if err = env.Value.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
			return nil
		}
	}
	return err
}

func (c *Checker) isAPI(path string) bool {
	for _, p := range c.prefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// recorder passes a response through, keeping its status and body.
type recorder struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}
