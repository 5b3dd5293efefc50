package main

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/hosttest"
)

// TestServeListenExitCodes: a busy port is an unavailable resource (69),
// not a usage error; an address that is not one stays a usage error (64).
func TestServeListenExitCodes(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	h := homeCLI{t, filepath.Join(t.TempDir(), "home")}
	cases := []struct {
		addr string
		code int
		want string
	}{
		{busy.Addr().String(), exitUnavail, "address already in use"},
		{"127.0.0.1", exitUsage, "missing port"},
	}
	for _, c := range cases {
		code, _, errs := h.run("serve", "--insecure-no-auth", "--addr", c.addr)
		if code != c.code || !strings.Contains(errs, "--addr "+c.addr) || !strings.Contains(errs, c.want) {
			t.Errorf("serve --addr %s: exit %d (want %d), stderr %q (want %q)", c.addr, code, c.code, errs, c.want)
		}
	}
}

// TestServeBannerNamesTheConsole: the banner prints the console's URL.
func TestServeBannerNamesTheConsole(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb hosttest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--home", home, "serve", "--insecure-no-auth", "--addr", "127.0.0.1:0"}, strings.NewReader(""), &out, &errb)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(errb.String(), "packrun console at ") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, errb.String())
	}
	var served, console string
	for _, l := range strings.Split(errb.String(), "\n") {
		if rest, ok := strings.CutPrefix(l, "packrun serving on "); ok {
			served, _, _ = strings.Cut(rest, " ")
		}
		if rest, ok := strings.CutPrefix(l, "packrun console at "); ok {
			console = rest
		}
	}
	if served == "" || console != served+"/console/" {
		t.Fatalf("banner: serving on %q, console at %q\n%s", served, console, errb.String())
	}
}
