package packs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// HTTPGrant is one destination a pack may reach with outbound HTTP (the
// http_request import). Nothing is reachable without one; the zero list
// grants nothing. Defaults: scheme "https", the scheme's port, path prefix
// "/", methods ["GET"] (see Normalized).
type HTTPGrant struct {
	Scheme string `json:"scheme,omitempty"` // "https" (default) or "http"
	// Host is an exact host name or IP address (IPv6 in brackets), or
	// "*.example.com": any name with one or more labels before
	// example.com (not example.com itself).
	Host       string   `json:"host"`
	Port       int      `json:"port,omitempty"`       // default 443/80 by scheme
	PathPrefix string   `json:"pathPrefix,omitempty"` // default "/"
	Methods    []string `json:"methods,omitempty"`    // default ["GET"]
	// AllowRanges names address ranges the host otherwise refuses for this
	// destination: "loopback", "private" (RFC 1918, IPv6 ULA) and
	// "link-local". Cloud metadata addresses stay refused.
	AllowRanges []string     `json:"allowRanges,omitempty"`
	Secrets     []HTTPSecret `json:"secrets,omitempty"`
}

// HTTPSecret is a secret the host adds to requests to a destination: the
// value of the tenant's secret memory entry Name in namespace "secrets" (a
// JSON string), placed as a bearer token, a header or a query parameter
// (exactly one). The guest never sees it.
type HTTPSecret struct {
	Name   string `json:"name"`
	Bearer bool   `json:"bearer,omitempty"`
	Header string `json:"header,omitempty"`
	Query  string `json:"query,omitempty"`
}

// HTTP address range names (HTTPGrant.AllowRanges).
const (
	RangeLoopback  = "loopback"
	RangePrivate   = "private"
	RangeLinkLocal = "link-local"
)

var httpRanges = []string{RangeLoopback, RangePrivate, RangeLinkLocal}

// MaxHTTPGrants caps the destinations one manifest lists.
const MaxHTTPGrants = 64

// hostOnlyHeaders are headers only the host sets on an outbound request.
var hostOnlyHeaders = []string{"host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "trailer", "keep-alive", "proxy-connection"}

// HostOnlyHeader reports whether the host alone sets header name.
func HostOnlyHeader(name string) bool { return slices.Contains(hostOnlyHeaders, strings.ToLower(name)) }

// Normalized returns g with its defaults filled in.
func (g HTTPGrant) Normalized() HTTPGrant {
	if g.Scheme == "" {
		g.Scheme = "https"
	}
	if g.Port == 0 {
		g.Port = 443
		if g.Scheme == "http" {
			g.Port = 80
		}
	}
	if g.PathPrefix == "" {
		g.PathPrefix = "/"
	}
	if len(g.Methods) == 0 {
		g.Methods = []string{"GET"}
	}
	return g
}

// Describe renders the grant as a permission line: "may reach
// https://api.example.com:443/v1/ (GET, POST) with secret github_token as
// a bearer token".
func (g HTTPGrant) Describe() string {
	n := g.Normalized()
	s := fmt.Sprintf("may reach %s://%s:%d%s (%s)", n.Scheme, n.Host, n.Port, n.PathPrefix, strings.Join(n.Methods, ", "))
	if len(n.AllowRanges) > 0 {
		s += " including " + strings.Join(n.AllowRanges, ", ") + " addresses"
	}
	for i, sec := range n.Secrets {
		if i == 0 {
			s += " with"
		} else {
			s += " and"
		}
		s += " secret " + sec.Name + " as " + sec.Placement()
	}
	return s
}

// Placement says where the secret goes: "a bearer token", "header X-Key",
// "query parameter key".
func (s HTTPSecret) Placement() string {
	switch {
	case s.Bearer:
		return "a bearer token"
	case s.Header != "":
		return "header " + s.Header
	}
	return "query parameter " + s.Query
}

// ValidToken reports whether s is an HTTP token (RFC 9110 §5.6.2): a
// method or header name.
func ValidToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// CheckHTTPHost checks a grant's host: a lowercase DNS name, "*." and a
// name (leftmost wildcard only), an IPv4 address or an IPv6 address in
// brackets; no scheme, port, path or user.
func CheckHTTPHost(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("is empty")
	case strings.ContainsAny(h, "/?#"):
		return fmt.Errorf("%s has a path in it: put it in pathPrefix", quote(h))
	case strings.Contains(h, "@"):
		return fmt.Errorf("%s has user information in it", quote(h))
	case strings.HasPrefix(h, "["):
		a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if err != nil || !strings.HasSuffix(h, "]") || !a.Is6() || a.Zone() != "" {
			return fmt.Errorf("%s is not an IPv6 address in brackets (a port goes in port)", quote(h))
		}
		return nil
	case strings.Contains(h, ":"):
		return fmt.Errorf("%s has a port in it: put it in port (IPv6 addresses go in brackets)", quote(h))
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	name := h
	if rest, ok := strings.CutPrefix(h, "*."); ok {
		name = rest
		if !strings.Contains(name, ".") {
			return fmt.Errorf("%s: a wildcard must cover a name of two or more labels (*.example.com)", quote(h))
		}
	}
	if strings.Contains(name, "*") {
		return fmt.Errorf("%s: a wildcard may only be the leftmost label (*.example.com)", quote(h))
	}
	if len(name) > 253 {
		return fmt.Errorf("%s is longer than 253 characters", quote(h))
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return fmt.Errorf("%s is not a valid host name (empty or bad label %s)", quote(h), quote(l))
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return fmt.Errorf("%s is not a valid host name: lowercase letters, digits and '-' only", quote(h))
			}
		}
	}
	return nil
}

// checkHTTP checks $.grants.http.
func checkHTTP(c *checker, grants []HTTPGrant) {
	if len(grants) > MaxHTTPGrants {
		c.add("$.grants.http", "lists %d destinations, at most %d", len(grants), MaxHTTPGrants)
	}
	for i, g := range grants {
		p := indexPath("$.grants.http", i)
		if g.Scheme != "" && g.Scheme != "https" && g.Scheme != "http" {
			c.add(fieldPath(p, "scheme"), "scheme %s is not supported: https or http", quote(g.Scheme))
		}
		if err := CheckHTTPHost(g.Host); err != nil {
			c.add(fieldPath(p, "host"), "host %v", err)
		}
		if g.Port < 0 || g.Port > 65535 {
			c.add(fieldPath(p, "port"), "port %d is out of range 1..65535", g.Port)
		}
		if pp := g.PathPrefix; pp != "" {
			if msg := checkPathPrefix(pp); msg != "" {
				c.add(fieldPath(p, "pathPrefix"), "pathPrefix %s %s", quote(pp), msg)
			}
		}
		for j, m := range g.Methods {
			mp := indexPath(fieldPath(p, "methods"), j)
			switch {
			case !ValidToken(m) || strings.ToUpper(m) != m:
				c.add(mp, "method %s is not an uppercase HTTP token (GET, POST, ...)", quote(m))
			case slices.Contains(g.Methods[:j], m):
				c.add(mp, "duplicate method %s", quote(m))
			}
		}
		for j, r := range g.AllowRanges {
			rp := indexPath(fieldPath(p, "allowRanges"), j)
			switch {
			case !slices.Contains(httpRanges, r):
				c.add(rp, "unknown range name %s; known: %s", quote(r), strings.Join(httpRanges, ", "))
			case slices.Contains(g.AllowRanges[:j], r):
				c.add(rp, "duplicate range %s", quote(r))
			}
		}
		for j, s := range g.Secrets {
			sp := indexPath(fieldPath(p, "secrets"), j)
			checkIdent(c, fieldPath(sp, "name"), s.Name, "secret name")
			n := 0
			for _, set := range []bool{s.Bearer, s.Header != "", s.Query != ""} {
				if set {
					n++
				}
			}
			switch {
			case n > 1:
				c.add(sp, "secret %s has more than one placement: choose one of bearer, header, query", quote(s.Name))
			case n == 0:
				c.add(sp, "secret %s has no placement: set bearer, header or query", quote(s.Name))
			case s.Header != "" && (!ValidToken(s.Header) || HostOnlyHeader(s.Header)):
				c.add(fieldPath(sp, "header"), "header %s is not a header name a secret may go in", quote(s.Header))
			case s.Query != "" && (strings.ContainsAny(s.Query, "&=#?+% ") || !printableASCII(s.Query)):
				c.add(fieldPath(sp, "query"), "query parameter %s: printable ASCII without &=#?+%% or spaces", quote(s.Query))
			}
		}
	}
}

func checkPathPrefix(pp string) string {
	switch {
	case !strings.HasPrefix(pp, "/"):
		return "must start with /"
	case strings.ContainsAny(pp, "?#%\\"):
		return "may not contain ?, #, % or \\"
	case !printableASCII(pp):
		return "must be printable ASCII"
	}
	for _, seg := range strings.Split(pp, "/") {
		if seg == ".." || seg == "." {
			return "may not contain . or .. segments"
		}
	}
	return ""
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
