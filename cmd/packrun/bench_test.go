package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// BenchmarkProcessInvokeInstalled: `packrun invoke local.hello.c` as a new
// process (start to output) on an installed C pack with a warm compilation
// cache.
func BenchmarkProcessInvokeInstalled(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "packrun")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	home := filepath.Join(dir, "home")
	run := func(args ...string) {
		cmd := exec.Command(bin, append([]string{"--home", home}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("packrun %v: %v\n%s", args, err, out)
		}
	}
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	run("keys", "generate", "--out", key)
	run("pack", "../../examples/hello-c", "-o", pack)
	run("sign", pack, "--key", key+".key")
	run("trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	run("install", pack) // also warms the compilation cache
	os.Setenv("PACKRUN_HOME", home)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run("invoke", "local.hello.c", "--input", `{"name":"bench"}`)
	}
}
