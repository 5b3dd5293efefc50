package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/internal/testing/hosttest"
)

// BenchmarkDevReact times packrun dev from a saved source file to the
// printed output of the rebuilt node (build, sign, install, run, replay),
// and, interleaved in the same run, the bare build (build.sh alone):
// react-ms minus build-ms is what dev adds to the language's build.
func BenchmarkDevReact(b *testing.B) {
	for _, lang := range []string{"wat", "c"} {
		b.Run(lang, func(b *testing.B) {
			dir := b.TempDir()
			home := filepath.Join(dir, "home")
			proj := filepath.Join(dir, "hello")
			var initOut, initErr hosttest.SyncBuffer
			if code := run(context.Background(), []string{"--home", home, "init", lang, proj}, strings.NewReader(""), &initOut, &initErr); code != 0 {
				b.Fatalf("init: %s", initErr.String())
			}
			e := devEdits[lang]
			src := filepath.Join(proj, e.source)
			orig, _ := os.ReadFile(src)
			edited := []byte(strings.Replace(string(orig), e.from, e.to, 1))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb hosttest.SyncBuffer
			done := make(chan int, 1)
			go func() { done <- run(ctx, []string{"--home", home, "dev", proj}, strings.NewReader(""), &out, &errb) }()
			at := benchWait(b, &out, 0, "watching")
			var build, react time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				next := edited
				if i%2 == 1 {
					next = orig
				}
				start := time.Now()
				if err := os.WriteFile(src, next, 0o644); err != nil {
					b.Fatal(err)
				}
				at = benchWait(b, &out, at, "output: ")
				react += time.Since(start)
				b.StopTimer()
				at = benchWait(b, &out, at, "replay: ")
				start = time.Now()
				cmd := exec.Command("bash", "build.sh")
				cmd.Dir = proj
				if o, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("build.sh: %v %s", err, o)
				}
				build += time.Since(start)
				time.Sleep(2 * devQuiet) // let dev see the bare build's rewrite of node.wasm (same content: no round)
				b.StartTimer()
			}
			b.ReportMetric(float64(react.Milliseconds())/float64(b.N), "react-ms")
			b.ReportMetric(float64(build.Milliseconds())/float64(b.N), "build-ms")
			cancel()
			<-done
		})
	}
}

func benchWait(b *testing.B, out *hosttest.SyncBuffer, from int, want string) int {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		s := out.String()
		if i := strings.Index(s[from:], want); i >= 0 {
			return from + i + len(want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("no %q after offset %d:\n%s", want, from, out.String())
	return 0
}
