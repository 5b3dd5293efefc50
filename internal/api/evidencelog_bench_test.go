package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/sqlite"
)

// benchAttempts is the size of the store BenchmarkEvidenceInclusion
// proves in.
const benchAttempts = 100_000

var proofBench struct {
	once  sync.Once
	err   error
	store *sqlite.Store
	ids   []string
	tiles *tlog.MemoryTiles
	size  uint64
}

// proofStore is a SQLite store of benchAttempts attempts, integrated, and
// an in-memory tile store of as many leaves (the raw tlog anchor).
func proofStore(b *testing.B) {
	proofBench.once.Do(func() {
		ctx := context.Background()
		dir := b.TempDir()
		s, err := sqlite.Open(ctx, filepath.Join(dir, "packrun.db"), sqlite.Options{})
		if err != nil {
			proofBench.err = err
			return
		}
		proofBench.store = s
		ids := make([]string, benchAttempts)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for w := range 64 {
			wg.Go(func() {
				for i := w; i < benchAttempts; i += 64 {
					a := &host.Attempt{Node: "example.hello", Outcome: abi.Completed, Input: json.RawMessage(`{"name":"bench"}`),
						Output: json.RawMessage(`{"greeting":"Hello, bench!"}`), StartedAt: time.Now(), EndedAt: time.Now()}
					if err := s.RecordAttempt(ctx, a); err != nil {
						errs <- err
						return
					}
					ids[i] = a.AttemptID
				}
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			proofBench.err = err
			return
		}
		cp, err := s.LogSync(ctx)
		if err != nil {
			proofBench.err = err
			return
		}
		proofBench.ids, proofBench.size = ids, cp.Size
		m := tlog.NewMemoryTiles()
		leaves := make([][]byte, cp.Size)
		for i := range leaves {
			leaves[i] = tlog.LeafHash(fmt.Appendf(nil, "entry %d", i))
		}
		res, err := tlog.Integrate(ctx, m, 0, leaves)
		if err == nil {
			err = m.Write(res.Tiles)
		}
		proofBench.tiles, proofBench.err = m, err
	})
	if proofBench.err != nil {
		b.Fatal(proofBench.err)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkEvidenceInclusion: GET /v1/evidence/proof/inclusion?entry=ID
// for a random attempt of a store of 100k attempts, through the API's
// handler (no network), beside the store's own proof (LogInclusion: the
// tiles read from SQLite) and the raw tlog proof over in-memory tiles of
// as many entries, in the same run. cpu-ns/op is the process's user+
// system CPU time per operation (getrusage), steadier than wall time on
// a shared machine. Run with -benchtime 2000x -count 3.
func BenchmarkEvidenceInclusion(b *testing.B) {
	proofStore(b)
	s := proofBench.store
	h := New(Config{Backend: s, Auth: Auth{Insecure: true}})
	ctx := context.Background()
	for _, mode := range []string{"api", "store", "tlog"} {
		b.Run(mode, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			b.ResetTimer()
			c := cpuTime()
			for b.Loop() {
				switch mode {
				case "api":
					id := proofBench.ids[rng.IntN(len(proofBench.ids))]
					req := httptest.NewRequest(http.MethodGet, "/v1/evidence/proof/inclusion?entry="+id, nil)
					req.Host = "127.0.0.1"
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("%d %s", w.Code, w.Body)
					}
				case "store":
					if _, err := s.LogInclusion(ctx, 1+rng.Int64N(int64(proofBench.size)), 0); err != nil {
						b.Fatal(err)
					}
				case "tlog":
					if _, err := tlog.InclusionProof(ctx, proofBench.tiles, rng.Uint64N(proofBench.size), proofBench.size); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(cpuTime()-c)/float64(b.N), "cpu-ns/op")
		})
	}
}
