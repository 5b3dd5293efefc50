package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
)

// Resolver resolves a host name; *net.Resolver is one. Tests give their own
// to control what a name resolves to.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Limits bound outbound HTTP. Zero fields take the defaults (DefaultLimits).
type Limits struct {
	// Requests is the number of requests one invocation may make.
	Requests int
	// RequestBytes bounds one request's body.
	RequestBytes int64
	// ResponseBytes bounds one response's body; ResponseHeaderBytes its
	// headers.
	ResponseBytes       int64
	ResponseHeaderBytes int64
	// Timeout is the host's cap on one request (the guest's timeout_ms
	// and the invocation's deadline may make it shorter).
	Timeout time.Duration
	// TruncateResponse cuts a body over ResponseBytes (and says so)
	// instead of refusing it.
	TruncateResponse bool
	// Redirects is the number of redirects followed, each within the grant.
	Redirects int
}

// DefaultLimits are the limits when none are configured.
var DefaultLimits = Limits{Requests: 16, RequestBytes: 1 << 20, ResponseBytes: 4 << 20, ResponseHeaderBytes: 64 << 10, Timeout: 30 * time.Second, Redirects: 5}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.Requests > 0 {
		d.Requests = l.Requests
	}
	if l.RequestBytes > 0 {
		d.RequestBytes = l.RequestBytes
	}
	if l.ResponseBytes > 0 {
		d.ResponseBytes = l.ResponseBytes
	}
	if l.ResponseHeaderBytes > 0 {
		d.ResponseHeaderBytes = l.ResponseHeaderBytes
	}
	if l.Timeout > 0 {
		d.Timeout = l.Timeout
	}
	if l.Redirects > 0 {
		d.Redirects = l.Redirects
	}
	d.TruncateResponse = l.TruncateResponse
	return d
}

// Config configures a Client.
type Config struct {
	// Resolver resolves host names; nil: net.DefaultResolver.
	Resolver Resolver
	// RootCAs verifies servers; nil: the system roots. Verification is
	// never turned off.
	RootCAs *x509.CertPool
	Limits  Limits
	// Observe, if set, is told about every request that reached a
	// destination: the granted host, bytes sent and received, duration.
	Observe func(grantHost string, sent, received int64, d time.Duration, err error)
}

// Client performs outbound requests. It is safe for concurrent use; one
// Client serves a whole host.
type Client struct {
	cfg    Config
	limits Limits

	mu         sync.Mutex
	transports map[string]*http.Transport // by allowed ranges: a pooled connection never crosses grants that allow less
}

// New returns a Client.
func New(cfg Config) *Client {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	return &Client{cfg: cfg, limits: cfg.Limits.withDefaults(), transports: map[string]*http.Transport{}}
}

// Limits returns the client's limits with their defaults.
func (c *Client) Limits() Limits { return c.limits }

// Close closes idle connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

// Request is a guest's request as decoded from http_request.
type Request struct {
	Method  string
	URL     string
	Headers [][2]string
	Body    []byte
	// Timeout is the guest's timeout_ms (0: none asked).
	Timeout time.Duration
}

// Response is what the guest receives.
type Response struct {
	Status    int
	Headers   [][2]string
	Body      []byte
	Truncated bool
	// Grant is the granted host that served it (for metrics).
	Grant string
}

// Error is a refused or failed request: the ABI status the guest gets,
// the cap kind for a breach, and a one-line message naming what.
type Error struct {
	Status abi.Status
	Kind   string // one of abi.CapHTTP* when Status is StatusCapabilityBreach
	Msg    string
	// Limit and Observed describe a breach.
	Limit, Observed int64
}

func (e *Error) Error() string { return e.Msg }

// CapKind is the breach's cap kind ("" when it is not a breach).
func (e *Error) CapKind() string { return e.Kind }

func denied(format string, args ...any) *Error {
	return &Error{Status: abi.StatusAccessDenied, Msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) *Error {
	return &Error{Status: abi.StatusValidation, Msg: fmt.Sprintf(format, args...)}
}

func breach(kind string, limit, observed int64, format string, args ...any) *Error {
	return &Error{Status: abi.StatusCapabilityBreach, Kind: kind, Limit: limit, Observed: observed, Msg: fmt.Sprintf(format, args...)}
}

func hostErr(format string, args ...any) *Error {
	return &Error{Status: abi.StatusHostError, Msg: fmt.Sprintf(format, args...)}
}

// SecretFunc returns the value of the tenant's secret name.
type SecretFunc func(ctx context.Context, name string) (string, error)

// Session is one invocation's use of a Client: its grant, its secrets and
// its request count.
type Session struct {
	c       *Client
	grants  []packs.HTTPGrant
	secrets SecretFunc

	mu    sync.Mutex
	count int
	// values are the secret values injected so far, by name: stripped
	// from every response.
	values map[string]string
}

// Session starts an invocation's use of c under grants.
func (c *Client) Session(grants []packs.HTTPGrant, secrets SecretFunc) *Session {
	norm := make([]packs.HTTPGrant, len(grants))
	for i, g := range grants {
		norm[i] = g.Normalized()
	}
	return &Session{c: c, grants: norm, secrets: secrets} // values made on the first secret
}

// Secrets returns the secret values the session injected, by name.
func (s *Session) Secrets() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.values))
	for k, v := range s.values {
		out[k] = v
	}
	return out
}

// match finds the grant that covers (method, u), or nil.
func (s *Session) match(method string, u *url.URL) *packs.HTTPGrant {
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	for i := range s.grants {
		g := &s.grants[i]
		if g.Scheme != u.Scheme || strconv.Itoa(g.Port) != orDefault(port, defaultPort(u.Scheme)) || !hostMatches(g.Host, host) {
			continue
		}
		if !strings.HasPrefix(u.EscapedPath(), g.PathPrefix) && !(u.EscapedPath() == "" && g.PathPrefix == "/") {
			continue
		}
		if slices.Contains(g.Methods, method) {
			return g
		}
	}
	return nil
}

// dotSegment reports whether an escaped path has a "." or ".." segment,
// spelt out or percent-encoded.
func dotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", ".")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func hostMatches(pattern, host string) bool {
	if rest, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(host, rest) && len(host) > len(rest)
	}
	return pattern == host
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// checkRequest validates the guest's request and returns its URL.
func (s *Session) checkRequest(r *Request) (*url.URL, *Error) {
	if r.Method == "" {
		r.Method = http.MethodGet
	}
	if !packs.ValidToken(r.Method) {
		return nil, invalid("method %q is not an HTTP token", clip(r.Method))
	}
	u, err := url.Parse(r.URL)
	if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Opaque != "" {
		return nil, invalid("url %q is not an absolute http or https URL without user information", clip(r.URL))
	}
	u.Fragment, u.RawFragment = "", ""
	if dotSegment(u.EscapedPath()) {
		return nil, invalid("url %q has a . or .. path segment: a server resolving it could leave the granted path prefix", clip(redactURL(u)))
	}
	for _, h := range r.Headers {
		switch {
		case !packs.ValidToken(h[0]):
			return nil, invalid("header name %q is not an HTTP token", clip(h[0]))
		case strings.ContainsAny(h[1], "\r\n\x00"):
			return nil, invalid("header %s: the value contains CR, LF or NUL", h[0])
		case packs.HostOnlyHeader(h[0]):
			return nil, invalid("header %s is set by the host only", h[0])
		}
	}
	if int64(len(r.Body)) > s.c.limits.RequestBytes {
		return nil, breach(abi.CapHTTPRequestBytes, s.c.limits.RequestBytes, int64(len(r.Body)), "request body of %d bytes is over the limit of %d", len(r.Body), s.c.limits.RequestBytes)
	}
	return u, nil
}

// Do performs r under the session's grant.
func (s *Session) Do(ctx context.Context, r Request) (*Response, error) {
	u, e := s.checkRequest(&r)
	if e != nil {
		return nil, e
	}
	g := s.match(r.Method, u)
	if g == nil {
		return nil, denied("no http grant allows %s %s", r.Method, redactURL(u))
	}
	s.mu.Lock()
	s.count++
	n := s.count
	s.mu.Unlock()
	if n > s.c.limits.Requests {
		return nil, breach(abi.CapHTTPRequests, int64(s.c.limits.Requests), int64(n), "request %d is over the limit of %d requests per invocation", n, s.c.limits.Requests)
	}
	timeout := s.c.limits.Timeout
	if r.Timeout > 0 {
		timeout = min(timeout, r.Timeout)
	}
	// A deadline of the invocation's own that comes first already bounds
	// the request (the usual case: no timer, no context to make).
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > timeout {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}

	var prog progress
	// The request is built without a URL and given u, the URL checked
	// against the grant (not parsed a second time from its string).
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, prog.trace()), r.Method, "", bytes.NewReader(r.Body))
	if err != nil {
		return nil, invalid("cannot build the request: %s", firstLine(err))
	}
	req.URL, req.Host = u, removeEmptyPort(u.Host)
	if len(r.Body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	for _, h := range r.Headers {
		req.Header.Add(h[0], h[1])
	}
	if e := s.inject(ctx, req, g); e != nil {
		return nil, e
	}
	var denial *Error
	hops := 0
	client := &http.Client{
		Transport: s.c.transport(g.AllowRanges),
		CheckRedirect: func(next *http.Request, via []*http.Request) error {
			hops++
			if hops > s.c.limits.Redirects {
				denial = denied("more than %d redirects from %s", s.c.limits.Redirects, redactURL(u))
				return denial
			}
			ng := s.match(next.Method, next.URL)
			if ng == nil {
				denial = denied("redirect to %s %s leaves the http grant", next.Method, s.redact(redactURL(next.URL)))
				return denial
			}
			// Secrets of the previous hop do not follow to another
			// destination; the new one's are added.
			for _, sec := range g.Secrets {
				switch {
				case sec.Bearer:
					next.Header.Del("Authorization")
				case sec.Header != "":
					next.Header.Del(sec.Header)
				}
			}
			if ng.Host != g.Host || ng.Port != g.Port || ng.Scheme != g.Scheme {
				q := next.URL.Query()
				for _, sec := range g.Secrets {
					if sec.Query != "" {
						q.Del(sec.Query)
					}
				}
				next.URL.RawQuery = q.Encode()
			}
			next.Header.Del("Cookie")
			if e := s.inject(next.Context(), next, ng); e != nil {
				denial = e
				return e
			}
			g = ng
			return nil
		},
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if e := prog.headerBreach(err, s.c.limits.ResponseHeaderBytes, u); e != nil {
			s.observe(g.Host, int64(len(r.Body)), 0, time.Since(start), e)
			return nil, e
		}
		e := s.classify(ctx, err, denial, timeout, u, r.Method)
		s.observe(g.Host, int64(len(r.Body)), 0, time.Since(start), e)
		return nil, e
	}
	defer resp.Body.Close()
	limit := s.c.limits.ResponseBytes
	body, err := readBody(resp, limit)
	if err != nil {
		e := s.classify(ctx, err, nil, timeout, u, r.Method)
		s.observe(g.Host, int64(len(r.Body)), int64(len(body)), time.Since(start), e)
		return nil, e
	}
	out := &Response{Status: resp.StatusCode, Grant: g.Host}
	if int64(len(body)) > limit {
		if !s.c.limits.TruncateResponse {
			e := breach(abi.CapHTTPResponseBytes, limit, int64(len(body)), "the response from %s is over the limit of %d bytes", redactURL(u), limit)
			s.observe(g.Host, int64(len(r.Body)), int64(len(body)), time.Since(start), e)
			return nil, e
		}
		body, out.Truncated = body[:limit], true
	}
	out.Body = s.redactBody(body, out.Truncated)
	keys := make([]string, 0, len(resp.Header))
	for k := range resp.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range resp.Header[k] {
			out.Headers = append(out.Headers, [2]string{k, s.redact(v)})
		}
	}
	s.observe(g.Host, int64(len(r.Body)), int64(len(body)), time.Since(start), nil)
	return out, nil
}

func (s *Session) observe(host string, sent, received int64, d time.Duration, err error) {
	if s.c.cfg.Observe != nil {
		s.c.cfg.Observe(host, sent, received, d, err)
	}
}

// classify turns a transport error into the guest's answer. Messages name
// the guest's own URL, never one with a secret added.
func (s *Session) classify(ctx context.Context, err error, denial *Error, timeout time.Duration, u *url.URL, method string) *Error {
	var oe *Error
	switch {
	case denial != nil:
		return denial
	case errors.As(err, &oe):
		return oe
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return breach(abi.CapHTTPTimeout, timeout.Milliseconds(), timeout.Milliseconds(), "%s %s did not finish within %s", method, redactURL(u), timeout)
	case strings.Contains(err.Error(), "server response headers exceeded"):
		return breach(abi.CapHTTPResponseBytes, s.c.limits.ResponseHeaderBytes, s.c.limits.ResponseHeaderBytes+1, "the response headers from %s are over the limit of %d bytes", redactURL(u), s.c.limits.ResponseHeaderBytes)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return hostErr("%s %s: %s", method, redactURL(u), s.redact(firstLine(err)))
}

// progress is how far a request got: written, and whether the response's
// headers arrived. The trace's callbacks may run on the transport's own
// goroutines.
type progress struct {
	wrote, headers atomic.Bool
	t              httptrace.ClientTrace
}

func (p *progress) trace() *httptrace.ClientTrace {
	p.t.WroteRequest = func(httptrace.WroteRequestInfo) { p.wrote.Store(true) }
	p.t.GotFirstResponseByte = func() { p.headers.Store(true) }
	return &p.t
}

// headerBreach recognises a response header block over the limit on
// HTTP/2: Go's client decodes at most the limit (MaxResponseHeaderBytes is
// also its advertised SETTINGS_MAX_HEADER_LIST_SIZE) and closes the
// connection with PROTOCOL_ERROR when the server sends more, before the
// response exists. A PROTOCOL_ERROR after the request was written and
// before any response header was decoded is that refusal. HTTP/1.1's
// equivalent is classified in classify.
func (p *progress) headerBreach(err error, limit int64, u *url.URL) *Error {
	if !p.wrote.Load() || p.headers.Load() || !strings.Contains(err.Error(), "connection error: PROTOCOL_ERROR") {
		return nil
	}
	return breach(abi.CapHTTPResponseBytes, limit, limit+1, "the response headers from %s are over the limit of %d bytes (HTTP/2: the header block was refused)", redactURL(u), limit)
}

// inject adds g's secrets to req.
func (s *Session) inject(ctx context.Context, req *http.Request, g *packs.HTTPGrant) *Error {
	for _, sec := range g.Secrets {
		if s.secrets == nil {
			return hostErr("secret %s: no secret store", sec.Name)
		}
		v, err := s.secrets(ctx, sec.Name)
		if err != nil {
			return hostErr("secret %s: %s", sec.Name, firstLine(err))
		}
		if v == "" || strings.ContainsAny(v, "\r\n\x00") {
			return hostErr("secret %s is empty or holds CR, LF or NUL", sec.Name)
		}
		s.mu.Lock()
		if s.values == nil {
			s.values = map[string]string{}
		}
		s.values[sec.Name] = v
		s.mu.Unlock()
		switch {
		case sec.Bearer:
			req.Header.Set("Authorization", "Bearer "+v)
		case sec.Header != "":
			req.Header.Set(sec.Header, v)
		default:
			q := req.URL.Query()
			q.Set(sec.Query, v)
			req.URL.RawQuery = q.Encode()
		}
	}
	return nil
}

// forms are the spellings of a secret value stripped from responses: as
// is and as a URL query or path escapes it.
func forms(v string) []string {
	out := []string{v}
	for _, f := range []string{url.QueryEscape(v), url.PathEscape(v)} {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// redact replaces every injected secret value in s with [secret:NAME].
func (s *Session) redact(text string) string {
	if !s.hasSecrets() {
		return text
	}
	return string(s.redactBytes([]byte(text), false))
}

// hasSecrets reports whether the session injected a secret yet (most
// requests carry none: nothing to redact).
func (s *Session) hasSecrets() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.values) > 0
}

func (s *Session) redactBody(b []byte, truncated bool) []byte { return s.redactBytes(b, truncated) }

func (s *Session) redactBytes(b []byte, truncated bool) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.values))
	for n := range s.values {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		for _, f := range forms(s.values[n]) {
			if bytes.Contains(b, []byte(f)) {
				b = bytes.ReplaceAll(b, []byte(f), []byte("[secret:"+n+"]"))
			}
			if truncated {
				// A body cut at the limit may end in the start of a secret.
				for k := len(f) - 1; k > 0; k-- {
					if bytes.HasSuffix(b, []byte(f[:k])) {
						b = b[:len(b)-k]
						break
					}
				}
			}
		}
	}
	return b
}

// readBody reads at most limit+1 bytes of resp's body (one more than
// allowed tells an over-long body), in one buffer of the announced size
// when the server gave one.
func readBody(resp *http.Response, limit int64) ([]byte, error) {
	r := io.LimitReader(resp.Body, limit+1)
	n := resp.ContentLength
	if n < 0 || n > limit {
		return io.ReadAll(r)
	}
	// io.ReadAll's loop, starting at the right size.
	b := make([]byte, 0, n+1)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// removeEmptyPort strips an empty port ("host:") as http.NewRequest does
// for the Host it sends.
func removeEmptyPort(host string) string {
	if strings.LastIndex(host, ":") > strings.LastIndex(host, "]") {
		return strings.TrimSuffix(host, ":")
	}
	return host
}

// redactURL renders u for messages: without its query (which may carry
// a secret once one is added; the guest's own query is its to know).
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery = "", false
	return c.String()
}

// transport returns the transport for grants allowing ranges allow.
func (c *Client) transport(allow []string) *http.Transport {
	key := ""
	switch len(allow) {
	case 0:
	case 1:
		key = allow[0] // no allocation on the common paths
	default:
		key = strings.Join(slices.Sorted(slices.Values(allow)), ",")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.transports[key]; ok {
		return t
	}
	allowed := slices.Clone(allow)
	d := &net.Dialer{Timeout: c.limits.Timeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return c.dial(ctx, d, network, addr, allowed)
		},
		TLSClientConfig:        &tls.Config{RootCAs: c.cfg.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: c.limits.ResponseHeaderBytes,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        60 * time.Second,
		TLSHandshakeTimeout:    c.limits.Timeout,
		DisableCompression:     true,
		Proxy:                  nil,
	}
	c.transports[key] = t
	return t
}

// dial resolves addr's host itself, refuses every address in a range the
// grant does not allow, and dials a checked address (never the name, so
// a second resolution cannot answer differently).
func (c *Client) dial(ctx context.Context, d *net.Dialer, network, addr string, allow []string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = c.cfg.Resolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
	}
	for _, a := range addrs {
		if why := refusal(a, allow); why != "" {
			return nil, denied("%s resolves to %s, %s, which the http grant does not allow", host, a.Unmap(), why)
		}
	}
	var last error
	for _, a := range addrs {
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		last = err
	}
	return nil, last
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}
