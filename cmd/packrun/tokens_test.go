package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	packrun "github.com/packrun/packrun"
	"time"
)

// tokens create prints the token alone on its last line; list shows it
// (never the secret); revoke ends it; bad input is refused by name.
func TestTokensCommands(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	out := h.ok("tokens", "create", "--tenant", "acme", "--scopes", "invoke,tasks:read", "--name", "ci bot", "--expires", "30d")
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	token := lines[len(lines)-1]
	m := regexp.MustCompile(`^prt_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$`).FindStringSubmatch(token)
	if m == nil {
		t.Fatalf("last line is not a token alone: %q\n%s", token, out)
	}
	id := m[1]
	list := h.ok("tokens", "list")
	if !strings.Contains(list, id) || !strings.Contains(list, "ci bot") || !strings.Contains(list, "invoke,tasks:read") || !strings.Contains(list, "expires") {
		t.Fatalf("list: %s", list)
	}
	if strings.Contains(list, token[len("prt_")+13:]) {
		t.Fatal("list shows the secret")
	}
	var js []map[string]any
	if err := json.Unmarshal([]byte(h.ok("tokens", "list", "--json")), &js); err != nil || len(js) != 1 || js[0]["tenant"] != "acme" {
		t.Fatalf("list --json: %v %v", js, err)
	}
	if strings.Contains(h.ok("tokens", "list", "--json"), "secret") {
		t.Fatal("list --json shows a secret hash")
	}
	if out := h.ok("tokens", "revoke", id); !strings.Contains(out, "revoked token "+id) {
		t.Fatalf("revoke: %s", out)
	}
	if !strings.Contains(h.ok("tokens", "list"), "revoked") {
		t.Fatal("list after revoke does not say revoked")
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"tokens", "create", "--scopes", "invoke"}, 64, "--tenant is required"},
		{[]string{"tokens", "create", "--tenant", "acme"}, 64, "--scopes is required"},
		{[]string{"tokens", "create", "--tenant", "acme", "--scopes", "invoke,root"}, 64, `unknown scope "root"`},
		{[]string{"tokens", "create", "--tenant", "Acme!", "--scopes", "invoke"}, 64, "not a tenant name"},
		{[]string{"tokens", "create", "--tenant", "acme", "--scopes", "invoke", "--expires", "soon"}, 64, `invalid argument "soon" for "--expires" flag`},
		{[]string{"tokens", "revoke", "nope"}, 66, "nope"},
	} {
		code, out, errs := h.run(c.args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, %s%s (want %d, %q)", c.args, code, out, errs, c.code, c.msg)
		}
	}
}

// serve refuses, with a one-line reason, to listen beyond loopback without
// a token, and --insecure-no-auth anywhere but on loopback.
func TestServeRefusesNetworkWithoutTokens(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"serve", "--addr", "0.0.0.0:0"}, "refusing to serve on 0.0.0.0:0 without authentication"},
		{[]string{"serve", "--addr", ":0", "--insecure-no-auth"}, "--insecure-no-auth is allowed on a loopback address only"},
		{[]string{"serve", "--tls-cert", "c.pem"}, "--tls-cert and --tls-key go together"},
	} {
		code, _, errs := h.run(c.args...)
		first, _, _ := strings.Cut(errs, "\n")
		if code != 64 || !strings.Contains(first, c.msg) {
			t.Errorf("%v: exit %d, %q", c.args, code, errs)
		}
	}
}

// serve over TLS with a token: HTTPS answers with the token, 401 without.
func TestServeTLSWithToken(t *testing.T) {
	home, bin := servedHome(t)
	h := homeCLI{t, home}
	out := h.ok("tokens", "create", "--tenant", "acme", "--scopes", "tasks:read")
	token := out[strings.LastIndex(strings.TrimRight(out, "\n"), "\n")+1:]
	token = strings.TrimSpace(token)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	s := startServeWith(t, bin, home, "--tls-cert", certFile, "--tls-key", keyFile)
	t.Cleanup(func() { s.Process.Signal(syscall.SIGTERM); s.Wait() })
	s.waitUp(t)
	m := regexp.MustCompile(`serving on https://(127\.0\.0\.1:\d+)`).FindStringSubmatch(s.logs.String())
	if m == nil {
		t.Fatalf("serve did not announce https: %s", s.logs.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 30 * time.Second}
	get := func(token string) int {
		req, _ := http.NewRequest("GET", "https://"+m[1]+"/v1/tasks", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(token); c != http.StatusOK {
		t.Fatalf("with the token: %d", c)
	}
	if c := get(""); c != http.StatusUnauthorized {
		t.Fatalf("without: %d", c)
	}
	if resp, err := http.Get("http://" + m[1] + "/v1/tasks"); err == nil && resp.StatusCode < 400 {
		t.Fatalf("plain HTTP answered %d", resp.StatusCode)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "packrun test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile, pool
}

// tokens create --help names every scope a token may carry, operator
// included: the list is auth.Scopes, not a copy that can fall behind.
func TestTokensCreateHelpListsEveryScope(t *testing.T) {
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	out := h.ok("tokens", "create", "--help")
	for _, s := range packrun.Scopes {
		if !strings.Contains(out, string(s)) {
			t.Errorf("tokens create --help does not name scope %s:\n%s", s, out)
		}
	}
}
