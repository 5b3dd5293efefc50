package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/packrun/packrun/packs"
	"github.com/packrun/packrun/runtime"
)

func TestPrintPermissions(t *testing.T) {
	var b strings.Builder
	printPermissions(&b, packs.Grants{HTTP: []packs.HTTPGrant{
		{Host: "api.example.com", PathPrefix: "/v1/", Methods: []string{"GET", "POST"}, Secrets: []packs.HTTPSecret{{Name: "github_token", Bearer: true}}},
		{Scheme: "http", Host: "127.0.0.1", Port: 8080, AllowRanges: []string{"loopback"}},
	}})
	want := "permission: may reach https://api.example.com:443/v1/ (GET, POST) with secret github_token as a bearer token\n" +
		"permission: may reach http://127.0.0.1:8080/ (GET) including loopback addresses\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printPermissions(&b, packs.Grants{})
	if b.Len() != 0 {
		t.Errorf("a pack without an http grant prints %q", b.String())
	}
}

func TestPrintHTTPCalls(t *testing.T) {
	trace, _ := json.Marshal([]runtime.Call{
		{Fn: "packrun:host/v1.config_get", Args: []byte(`{"key":"req"}`)},
		{Fn: "packrun:host/v1.http_request", Args: []byte(`{"url":"https://api.example.com/v1/x"}`), Result: []byte(`{"status":404,"headers":[],"body":""}`)},
		{Fn: "packrun:host/v1.http_request", Args: []byte(`{"method":"POST","url":"http://127.0.0.1/"}`), Status: 1, Result: []byte(`{"error":"no http grant allows POST http://127.0.0.1/"}`)},
		{Fn: "packrun:host/v1.http_request", Args: []byte("sha256:00"), Status: 20, Result: []byte(`{"error":"too big","kind":"http-response-bytes"}`)},
	})
	var b strings.Builder
	printHTTPCalls(&b, trace)
	want := "http_request: GET https://api.example.com/v1/x -> HTTP 404, 37 bytes\n" +
		"http_request: POST http://127.0.0.1/ -> access_denied: no http grant allows POST http://127.0.0.1/\n" +
		"http_request: (request recorded by digest) -> capability_breach: http-response-bytes\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
