package outbound

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/packs"
)

// fakeDNS is the resolver the tests control.
type fakeDNS map[string][]netip.Addr

func (f fakeDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

var dns = fakeDNS{
	"example.com":         {netip.MustParseAddr("127.0.0.1")}, // the httptest certificate's name
	"private.example.com": {netip.MustParseAddr("10.0.0.5")},
	"meta.example.com":    {netip.MustParseAddr("169.254.169.254")},
	"mixed.example.com":   {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
}

func tlsServer(t *testing.T, h http.Handler) (*httptest.Server, *x509.CertPool, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return srv, pool, port
}

func port(t *testing.T, p string) int {
	var n int
	fmt.Sscan(p, &n)
	return n
}

func wantErr(t *testing.T, err error, status abi.Status, kind, contains string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error with status %d", err, status)
	}
	if e.Status != status || e.Kind != kind || !strings.Contains(e.Msg, contains) || strings.Contains(e.Msg, "\n") {
		t.Fatalf("got status %d kind %q msg %q, want %d %q containing %q", e.Status, e.Kind, e.Msg, status, kind, contains)
	}
}

func TestGrantedRequestHTTP2(t *testing.T) {
	var proto int
	_, pool, p := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto = r.ProtoMajor
		w.Header().Add("X-B", "2")
		w.Header().Add("X-A", "1")
		fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.Path)
	}))
	c := New(Config{Resolver: dns, RootCAs: pool})
	s := c.Session([]packs.HTTPGrant{{Host: "example.com", Port: port(t, p), PathPrefix: "/v1/", Methods: []string{"GET", "POST"}, AllowRanges: []string{"loopback"}}}, nil)
	resp, err := s.Do(context.Background(), Request{Method: "POST", URL: "https://example.com:" + p + "/v1/x", Body: []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != "hello POST /v1/x" || proto != 2 {
		t.Fatalf("status %d body %q proto %d", resp.Status, resp.Body, proto)
	}
	var names []string
	for _, h := range resp.Headers {
		names = append(names, h[0])
	}
	if strings.Join(names, ",") != "Content-Length,Content-Type,Date,X-A,X-B" {
		t.Errorf("headers %v, want sorted by name", names)
	}
}

func TestRefusedDestinations(t *testing.T) {
	_, pool, p := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Errorf("the server was reached: %s", r.URL) }))
	pn := port(t, p)
	for _, tc := range []struct {
		name  string
		grant packs.HTTPGrant
		req   Request
		want  string
	}{
		{"127.0.0.1 without loopback allowed", packs.HTTPGrant{Host: "127.0.0.1", Port: pn}, Request{URL: "https://127.0.0.1:" + p + "/"}, "loopback"},
		{"[::1] without loopback allowed", packs.HTTPGrant{Host: "[::1]", Port: pn}, Request{URL: "https://[::1]:" + p + "/"}, "loopback"},
		{"169.254.169.254 even with link-local allowed", packs.HTTPGrant{Scheme: "http", Host: "169.254.169.254", AllowRanges: []string{"link-local", "private", "loopback"}}, Request{URL: "http://169.254.169.254/latest/meta-data/"}, "metadata"},
		{"a name resolving to metadata", packs.HTTPGrant{Host: "meta.example.com", AllowRanges: []string{"link-local"}}, Request{URL: "https://meta.example.com/"}, "metadata"},
		{"rebinding: a name resolving to a private address", packs.HTTPGrant{Host: "private.example.com"}, Request{URL: "https://private.example.com/"}, "private"},
		{"rebinding: a name resolving to loopback", packs.HTTPGrant{Host: "example.com", Port: pn}, Request{URL: "https://example.com:" + p + "/"}, "loopback"},
		{"one of several addresses refused", packs.HTTPGrant{Host: "mixed.example.com"}, Request{URL: "https://mixed.example.com/"}, "loopback"},
		{"no grant for the host", packs.HTTPGrant{Host: "other.example.com"}, Request{URL: "https://example.com:" + p + "/"}, "no http grant allows GET https://example.com:" + p + "/"},
		{"wildcard does not cover the bare name", packs.HTTPGrant{Host: "*.example.com", Port: pn}, Request{URL: "https://example.com:" + p + "/"}, "no http grant"},
		{"method not granted", packs.HTTPGrant{Host: "example.com", Port: pn, AllowRanges: []string{"loopback"}}, Request{Method: "DELETE", URL: "https://example.com:" + p + "/"}, "no http grant allows DELETE"},
		{"path outside the prefix", packs.HTTPGrant{Host: "example.com", Port: pn, PathPrefix: "/v1/", AllowRanges: []string{"loopback"}}, Request{URL: "https://example.com:" + p + "/v2/x"}, "no http grant"},
		{"scheme not granted", packs.HTTPGrant{Host: "example.com", Port: pn, AllowRanges: []string{"loopback"}}, Request{URL: "http://example.com:" + p + "/"}, "no http grant"},
		{"port not granted", packs.HTTPGrant{Host: "example.com", AllowRanges: []string{"loopback"}}, Request{URL: "https://example.com:" + p + "/"}, "no http grant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(Config{Resolver: dns, RootCAs: pool})
			_, err := c.Session([]packs.HTTPGrant{tc.grant}, nil).Do(context.Background(), tc.req)
			wantErr(t, err, abi.StatusAccessDenied, "", tc.want)
		})
	}
}

func TestEmptyGrantReachesNothing(t *testing.T) {
	_, err := New(Config{Resolver: dns}).Session(nil, nil).Do(context.Background(), Request{URL: "https://example.com/"})
	wantErr(t, err, abi.StatusAccessDenied, "", "no http grant")
}

func TestRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/in/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/in2/", http.StatusFound) })
	mux.HandleFunc("/in2/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "landed") })
	mux.HandleFunc("/out/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/secret-admin/", http.StatusFound) })
	mux.HandleFunc("/meta/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	})
	mux.HandleFunc("/loop/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, r.URL.Path+"x", http.StatusFound) })
	mux.HandleFunc("/secret-admin/", func(w http.ResponseWriter, r *http.Request) { t.Error("the redirect left the grant") })
	_, pool, p := tlsServer(t, mux)
	grants := []packs.HTTPGrant{{Host: "example.com", Port: port(t, p), PathPrefix: "/in", AllowRanges: []string{"loopback"}},
		{Host: "example.com", Port: port(t, p), PathPrefix: "/out/", AllowRanges: []string{"loopback"}},
		{Host: "example.com", Port: port(t, p), PathPrefix: "/meta/", AllowRanges: []string{"loopback"}},
		{Host: "example.com", Port: port(t, p), PathPrefix: "/loop/", AllowRanges: []string{"loopback"}}}
	c := New(Config{Resolver: dns, RootCAs: pool})
	base := "https://example.com:" + p
	resp, err := c.Session(grants, nil).Do(context.Background(), Request{URL: base + "/in/"})
	if err != nil || string(resp.Body) != "landed" {
		t.Fatalf("redirect within the grant: %v %v", resp, err)
	}
	_, err = c.Session(grants, nil).Do(context.Background(), Request{URL: base + "/out/"})
	wantErr(t, err, abi.StatusAccessDenied, "", "redirect to GET "+base+"/secret-admin/ leaves the http grant")
	_, err = c.Session(grants, nil).Do(context.Background(), Request{URL: base + "/meta/"})
	wantErr(t, err, abi.StatusAccessDenied, "", "leaves the http grant")
	_, err = c.Session(grants, nil).Do(context.Background(), Request{URL: base + "/loop/"})
	wantErr(t, err, abi.StatusAccessDenied, "", "more than 5 redirects")
}

// slowloris serves plain HTTP that dribbles its headers, one byte every
// 20 ms, forever.
func slowloris(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				bufio.NewReader(conn).ReadString('\n')
				conn.Write([]byte("HTTP/1.1 200 OK\r\n"))
				for {
					select {
					case <-done:
						return
					case <-time.After(20 * time.Millisecond):
					}
					if _, err := conn.Write([]byte("X")); err != nil {
						return
					}
				}
			}()
		}
	}()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

func TestSlowlorisTimesOut(t *testing.T) {
	p := slowloris(t)
	c := New(Config{Limits: Limits{Timeout: 5 * time.Second}})
	s := c.Session([]packs.HTTPGrant{{Scheme: "http", Host: "127.0.0.1", Port: port(t, p), AllowRanges: []string{"loopback"}}}, nil)
	_, err := s.Do(context.Background(), Request{URL: "http://127.0.0.1:" + p + "/", Timeout: 200 * time.Millisecond})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPTimeout, "did not finish within 200ms")
	// The invocation's own deadline bounds it too.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err = s.Do(ctx, Request{URL: "http://127.0.0.1:" + p + "/"})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPTimeout, "did not finish")
}

func TestResponseBounds(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("z", 4096))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	var proto atomic.Int32
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		proto.Store(int32(r.ProtoMajor))
		for i := range 10000 {
			w.Header().Set(fmt.Sprintf("X-H%d", i), "v")
		}
	})
	_, pool, p := tlsServer(t, mux)
	g := []packs.HTTPGrant{{Host: "example.com", Port: port(t, p), AllowRanges: []string{"loopback"}}}
	base := "https://example.com:" + p
	c := New(Config{Resolver: dns, RootCAs: pool, Limits: Limits{ResponseBytes: 64 << 10}})
	_, err := c.Session(g, nil).Do(context.Background(), Request{URL: base + "/endless"})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPResponseBytes, "over the limit of 65536 bytes")
	// 10,000 headers over HTTP/2 (a real h2 TLS connection) and over
	// HTTP/1.1 are the same response-bytes breach, not a connection error.
	_, err = c.Session(g, nil).Do(context.Background(), Request{URL: base + "/headers"})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPResponseBytes, "the response headers from https://example.com:"+p+"/headers are over the limit of 65536 bytes")
	if proto.Load() != 2 {
		t.Fatalf("the /headers request was HTTP/%d, want HTTP/2", proto.Load())
	}
	h1 := httptest.NewServer(mux)
	defer h1.Close()
	_, p1, _ := net.SplitHostPort(h1.Listener.Addr().String())
	g1 := []packs.HTTPGrant{{Scheme: "http", Host: "127.0.0.1", Port: port(t, p1), AllowRanges: []string{"loopback"}}}
	_, err = c.Session(g1, nil).Do(context.Background(), Request{URL: "http://127.0.0.1:" + p1 + "/headers"})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPResponseBytes, "headers")
	tc := New(Config{Resolver: dns, RootCAs: pool, Limits: Limits{ResponseBytes: 64 << 10, TruncateResponse: true}})
	resp, err := tc.Session(g, nil).Do(context.Background(), Request{URL: base + "/endless"})
	if err != nil || !resp.Truncated || len(resp.Body) != 64<<10 {
		t.Fatalf("truncate: %v, %d bytes", err, len(resp.Body))
	}
}

func TestRequestValidationAndCaps(t *testing.T) {
	var hits int
	_, pool, p := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	g := []packs.HTTPGrant{{Host: "example.com", Port: port(t, p), Methods: []string{"GET", "POST"}, AllowRanges: []string{"loopback"}}}
	u := "https://example.com:" + p + "/"
	c := New(Config{Resolver: dns, RootCAs: pool, Limits: Limits{Requests: 2, RequestBytes: 10}})
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"CR/LF in a header value (smuggling)", Request{URL: u, Headers: [][2]string{{"X-A", "v\r\nHost: evil"}}}, "CR, LF or NUL"},
		{"NUL in a header value", Request{URL: u, Headers: [][2]string{{"X-A", "v\x00"}}}, "CR, LF or NUL"},
		{"bad header name", Request{URL: u, Headers: [][2]string{{"X A:", "v"}}}, "not an HTTP token"},
		{"Host set by the guest", Request{URL: u, Headers: [][2]string{{"host", "evil"}}}, "set by the host only"},
		{"Transfer-Encoding set by the guest", Request{URL: u, Headers: [][2]string{{"Transfer-Encoding", "chunked"}}}, "set by the host only"},
		{"bad method", Request{Method: "GE T", URL: u}, "not an HTTP token"},
		{"relative url", Request{URL: "/x"}, "not an absolute"},
		{"ftp url", Request{URL: "ftp://example.com/"}, "not an absolute"},
		{"user info", Request{URL: "https://u:p@example.com:" + p + "/"}, "user information"},
		{"dot segments leaving the prefix", Request{URL: u + "v1/../admin"}, ". or .. path segment"},
		{"encoded dot segments", Request{URL: u + "v1/%2E%2e/admin"}, ". or .. path segment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Session(g, nil).Do(context.Background(), tc.req)
			wantErr(t, err, abi.StatusValidation, "", tc.want)
		})
	}
	_, err := c.Session(g, nil).Do(context.Background(), Request{Method: "POST", URL: u, Body: []byte("12345678901")})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPRequestBytes, "over the limit of 10")
	s := c.Session(g, nil)
	for range 2 {
		if _, err := s.Do(context.Background(), Request{URL: u}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Do(context.Background(), Request{URL: u})
	wantErr(t, err, abi.StatusCapabilityBreach, abi.CapHTTPRequests, "over the limit of 2 requests")
	if hits != 2 {
		t.Errorf("server hit %d times, want 2", hits)
	}
}

func TestNetworkFailuresAreHostErrors(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	c := New(Config{Resolver: dns})
	g := []packs.HTTPGrant{{Scheme: "http", Host: "127.0.0.1", Port: port(t, p), AllowRanges: []string{"loopback"}}, {Host: "nowhere.example.com"}}
	_, err := c.Session(g, nil).Do(context.Background(), Request{URL: "http://127.0.0.1:" + p + "/"})
	wantErr(t, err, abi.StatusHostError, "", "refused")
	_, err = c.Session(g, nil).Do(context.Background(), Request{URL: "https://nowhere.example.com/"})
	wantErr(t, err, abi.StatusHostError, "", "no such host")
	// TLS verification is on: a server the roots do not vouch for fails.
	_, _, tp := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("reached without verification") }))
	g = []packs.HTTPGrant{{Host: "example.com", Port: port(t, tp), AllowRanges: []string{"loopback"}}}
	_, err = New(Config{Resolver: dns, RootCAs: x509.NewCertPool()}).Session(g, nil).Do(context.Background(), Request{URL: "https://example.com:" + tp + "/"})
	wantErr(t, err, abi.StatusHostError, "", "certificate")
}

func TestSecretsInjectedAndNeverReturned(t *testing.T) {
	const secret = "s3cr3t+t0ken/value"
	_, pool, p := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// An echo server: it hands back everything it was sent.
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Echo-Query", r.URL.RawQuery)
		fmt.Fprintf(w, "auth=%s key=%s query=%s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"), r.URL.RawQuery)
	}))
	g := []packs.HTTPGrant{{Host: "example.com", Port: port(t, p), AllowRanges: []string{"loopback"},
		Secrets: []packs.HTTPSecret{{Name: "tok", Bearer: true}, {Name: "key", Header: "X-Api-Key"}, {Name: "q", Query: "api_key"}}}}
	secrets := func(_ context.Context, name string) (string, error) { return secret + "-" + name, nil }
	s := New(Config{Resolver: dns, RootCAs: pool}).Session(g, secrets)
	resp, err := s.Do(context.Background(), Request{URL: "https://example.com:" + p + "/?a=1", Headers: [][2]string{{"Authorization", "Bearer guest"}}})
	if err != nil {
		t.Fatal(err)
	}
	all := string(EncodeResponse(resp))
	if strings.Contains(all, "s3cr3t") {
		t.Fatalf("the guest can read a secret back: %s", all)
	}
	for _, want := range []string{"auth=Bearer [secret:tok]", "key=[secret:key]", "api_key=[secret:q]"} {
		if !strings.Contains(string(resp.Body), want) {
			t.Errorf("body %q lacks %q (the secret was not injected or not stripped)", resp.Body, want)
		}
	}
}
