package tlog

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// The benchmarks run on a log of benchSize entries held in MemoryTiles,
// each beside its anchor measured in the same run: the Go checksum
// database's golang.org/x/mod/sumdb/tlog (ProveRecord, CheckRecord,
// ProveTree, CheckTree, StoredHashesForRecordHash) over all the tree's
// hashes kept in memory. Besides ns/op they report cpu-ns/op, the
// process's user+system CPU time per operation (getrusage), steadier than
// wall time on a machine shared with other work.
const benchSize = 1_000_000

var bench struct {
	once   sync.Once
	tiles  *MemoryTiles
	root   []byte
	sumdb  tlog.HashReaderFunc
	stored []tlog.Hash
}

func benchLog(b *testing.B) {
	bench.once.Do(func() {
		bench.tiles = NewMemoryTiles()
		bench.root = grow(b, bench.tiles, 0, benchSize, 10000)
		for i := int64(0); i < benchSize; i++ {
			hs, err := tlog.StoredHashesForRecordHash(i, tlog.RecordHash(entry(int(i))), bench.sumdb)
			if err != nil {
				b.Fatal(err)
			}
			bench.stored = append(bench.stored, hs...)
		}
	})
	bench.sumdb = func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = bench.stored[x]
		}
		return out, nil
	}
}

func init() {
	bench.sumdb = func(ix []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(ix))
		for i, x := range ix {
			out[i] = bench.stored[x]
		}
		return out, nil
	}
}

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measure runs f b.N times and reports the CPU time per operation.
func measure(b *testing.B, f func(i int)) {
	b.ReportAllocs()
	b.ResetTimer()
	c := cpuNow()
	for i := 0; i < b.N; i++ {
		f(i)
	}
	b.ReportMetric(float64(cpuNow()-c)/float64(b.N), "cpu-ns/op")
}

func BenchmarkInclusion(b *testing.B) {
	benchLog(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	ix := func() uint64 { return rng.Uint64N(benchSize) }
	b.Run("prove/tlog", func(b *testing.B) {
		measure(b, func(int) {
			if _, err := InclusionProof(ctx, bench.tiles, ix(), benchSize); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("prove/anchor-sumdb", func(b *testing.B) {
		measure(b, func(int) {
			if _, err := tlog.ProveRecord(benchSize, int64(ix()), bench.sumdb); err != nil {
				b.Fatal(err)
			}
		})
	})
	const n = 1024
	type pr struct {
		i uint64
		p [][]byte
		s tlog.RecordProof
	}
	proofs := make([]pr, n)
	for k := range proofs {
		i := ix()
		p, err := InclusionProof(ctx, bench.tiles, i, benchSize)
		if err != nil {
			b.Fatal(err)
		}
		s, err := tlog.ProveRecord(benchSize, int64(i), bench.sumdb)
		if err != nil {
			b.Fatal(err)
		}
		proofs[k] = pr{i, p, s}
	}
	var th tlog.Hash
	copy(th[:], bench.root)
	b.Run("verify/tlog", func(b *testing.B) {
		measure(b, func(k int) {
			p := proofs[k%n]
			if err := VerifyInclusion(p.i, benchSize, LeafHash(entry(int(p.i))), p.p, bench.root); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("verify/anchor-sumdb", func(b *testing.B) {
		measure(b, func(k int) {
			p := proofs[k%n]
			if err := tlog.CheckRecord(p.s, benchSize, th, int64(p.i), tlog.RecordHash(entry(int(p.i)))); err != nil {
				b.Fatal(err)
			}
		})
	})
}

func BenchmarkConsistency(b *testing.B) {
	benchLog(b)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	from := func() uint64 { return 1 + rng.Uint64N(benchSize-1) }
	b.Run("prove/tlog", func(b *testing.B) {
		measure(b, func(int) {
			if _, err := ConsistencyProof(ctx, bench.tiles, from(), benchSize); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("prove/anchor-sumdb", func(b *testing.B) {
		measure(b, func(int) {
			if _, err := tlog.ProveTree(benchSize, int64(from()), bench.sumdb); err != nil {
				b.Fatal(err)
			}
		})
	})
	const n = 256
	type pr struct {
		from       uint64
		root       []byte
		p          [][]byte
		s          tlog.TreeProof
		sRoot, sTh tlog.Hash
	}
	proofs := make([]pr, n)
	var th tlog.Hash
	copy(th[:], bench.root)
	for k := range proofs {
		f := from()
		root, err := RootAt(ctx, bench.tiles, f)
		if err != nil {
			b.Fatal(err)
		}
		p, err := ConsistencyProof(ctx, bench.tiles, f, benchSize)
		if err != nil {
			b.Fatal(err)
		}
		s, err := tlog.ProveTree(benchSize, int64(f), bench.sumdb)
		if err != nil {
			b.Fatal(err)
		}
		var sr tlog.Hash
		copy(sr[:], root)
		proofs[k] = pr{f, root, p, s, sr, th}
	}
	b.Run("verify/tlog", func(b *testing.B) {
		measure(b, func(k int) {
			p := proofs[k%n]
			if err := VerifyConsistency(p.from, benchSize, p.p, p.root, bench.root); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("verify/anchor-sumdb", func(b *testing.B) {
		measure(b, func(k int) {
			p := proofs[k%n]
			if err := tlog.CheckTree(p.s, benchSize, p.sTh, int64(p.from), p.sRoot); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// BenchmarkIntegrate appends batches to a log that starts at benchSize
// entries; leaves/s counts the leaves integrated per second of CPU. The
// anchor is the checksum database's per-record StoredHashesForRecordHash.
func BenchmarkIntegrate(b *testing.B) {
	benchLog(b)
	ctx := context.Background()
	for _, batch := range []int{1, 100, 1000} {
		leaves := leafHashes(benchSize, benchSize+batch)
		b.Run(fmt.Sprintf("batch=%d/tlog", batch), func(b *testing.B) {
			m := &MemoryTiles{tiles: make(map[[2]uint64][]byte, len(bench.tiles.tiles)+1000)}
			for k, v := range bench.tiles.tiles {
				m.tiles[k] = v
			}
			size := uint64(benchSize)
			c := cpuNow()
			measure(b, func(int) {
				res, err := Integrate(ctx, m, size, leaves)
				if err != nil {
					b.Fatal(err)
				}
				if err := m.Write(res.Tiles); err != nil {
					b.Fatal(err)
				}
				size = res.Size
			})
			b.ReportMetric(float64(b.N*batch)/(cpuNow()-c).Seconds(), "leaves/cpu-s")
		})
		b.Run(fmt.Sprintf("batch=%d/anchor-sumdb", batch), func(b *testing.B) {
			stored := append([]tlog.Hash(nil), bench.stored...)
			r := tlog.HashReaderFunc(func(ix []int64) ([]tlog.Hash, error) {
				out := make([]tlog.Hash, len(ix))
				for i, x := range ix {
					out[i] = stored[x]
				}
				return out, nil
			})
			size := int64(benchSize)
			c := cpuNow()
			measure(b, func(int) {
				for _, l := range leaves {
					var h tlog.Hash
					copy(h[:], l)
					hs, err := tlog.StoredHashesForRecordHash(size, h, r)
					if err != nil {
						b.Fatal(err)
					}
					stored = append(stored, hs...)
					size++
				}
			})
			b.ReportMetric(float64(b.N*batch)/(cpuNow()-c).Seconds(), "leaves/cpu-s")
		})
	}
}
