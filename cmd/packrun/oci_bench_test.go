package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/ocitest"
)

// BenchmarkOCIPushPull: `packrun push` and `packrun pull` (as processes)
// of the signed Go hello pack (≈ 3.3 MB) to a loopback docker-registry,
// interleaved in each iteration with `oras push` / `oras pull` of the same
// file as the anchor. Each push goes to a fresh repository, so every blob
// is uploaded. Reports wall and CPU (user+system of the client process)
// milliseconds per operation. The oras CLI is $PACKRUN_ORAS or
// ~/.cache/packrun-ci/bin/oras (GOBIN=... go install
// oras.land/oras/cmd/oras@v1.3.6); without it the anchor is left out.
func BenchmarkOCIPushPull(b *testing.B) {
	dir := b.TempDir()
	bin := buildPackrun(b, dir)
	home := filepath.Join(dir, "home")
	reg := ocitest.Start(b, ocitest.Options{})
	type cost struct{ wall, cpu time.Duration }
	run := func(name string, wd string, args ...string) cost {
		cmd := exec.Command(name, args...)
		cmd.Dir = wd
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		wall := time.Since(t0)
		if err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return cost{wall, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	}
	key := filepath.Join(dir, "k")
	pack := filepath.Join(dir, "hello.pack")
	run(bin, dir, "--home", home, "keys", "generate", "--out", key)
	run(bin, dir, "--home", home, "pack", mustAbs(b, "../../examples/hello-go"), "-o", pack)
	run(bin, dir, "--home", home, "sign", pack, "--key", key+".key")
	run(bin, dir, "--home", home, "trust", "add-key", "k", key+".pub", "--namespace", "local.*")
	oras := os.Getenv("PACKRUN_ORAS")
	if oras == "" {
		oras = filepath.Join(os.Getenv("HOME"), ".cache", "packrun-ci", "bin", "oras")
	}
	if _, err := os.Stat(oras); err != nil {
		b.Logf("oras CLI not found (%s): the oras anchor is left out", oras)
		oras = ""
	}
	var sums [4]cost
	add := func(i int, c cost) { sums[i].wall += c.wall; sums[i].cpu += c.cpu }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ref := fmt.Sprintf("%s/bench/p%d:1.0.0", reg.Addr, i)
		add(0, run(bin, dir, "--home", home, "push", pack, ref))
		add(1, run(bin, dir, "--home", home, "pull", ref, "-o", filepath.Join(dir, "pulled.pack")))
		if oras != "" {
			oref := fmt.Sprintf("%s/bench/o%d:1.0.0", reg.Addr, i)
			add(2, run(oras, dir, "push", "--plain-http", "--artifact-type", "application/vnd.packrun.pack.v1", oref, "hello.pack:application/vnd.packrun.pack.v1.tar+gzip"))
			add(3, run(oras, dir, "pull", "--plain-http", "-o", filepath.Join(dir, "oras-out"), oref))
		}
	}
	b.StopTimer()
	for i, name := range []string{"packrun-push", "packrun-pull", "oras-push", "oras-pull"} {
		if i >= 2 && oras == "" {
			continue
		}
		b.ReportMetric(float64(sums[i].wall.Microseconds())/1000/float64(b.N), name+"-ms/op")
		b.ReportMetric(float64(sums[i].cpu.Microseconds())/1000/float64(b.N), name+"-cpu-ms/op")
	}
}

func mustAbs(b *testing.B, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		b.Fatal(err)
	}
	return a
}
