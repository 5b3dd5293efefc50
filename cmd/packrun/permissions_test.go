package main

import (
	"strings"
	"testing"

	"github.com/packrun/packrun/packs"
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
