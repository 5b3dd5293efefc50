package postgres

import (
	"bytes"
	"crypto/ed25519"
	"path/filepath"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storetest"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

var _ host.Backend = (*Store)(nil)

// testSecretKey seals the contract stores' secret memory values;
// testHostKey seals their exported attempts and signs their head
// checkpoints (each node's in a directory of its own).
var (
	testSecretKey = bytes.Repeat([]byte{7}, 32)
	testHostKey   = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{9}, ed25519.SeedSize))
)

// openContractNodes opens n stores (nodes) on one fresh database, on the
// suite's clock, closed when the test ends.
func openContractNodes(t testing.TB, clock *storetest.Clock, n int) []host.Backend {
	t.Helper()
	return openQuotaNodes(t, clock, n, nil)
}

// openQuotaNodes is openContractNodes applying q.
func openQuotaNodes(t testing.TB, clock *storetest.Clock, n int, q host.StoreQuotas) []host.Backend {
	t.Helper()
	dsn := pgtest.DSN(t)
	var out []host.Backend
	for range n {
		s, err := Open(ctx, dsn, Options{Now: clock.Now, SecretKey: testSecretKey, HostKey: testHostKey,
			CheckpointFile: filepath.Join(t.TempDir(), "evidence-head.json"), Quotas: q})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		out = append(out, s)
	}
	return out
}

// openContract is the contract suite's Opener: one store on a fresh
// database.
func openContract(t testing.TB, clock *storetest.Clock) host.Backend {
	return openContractNodes(t, clock, 1)[0]
}

// TestContract runs the whole backend-agnostic store contract
// (internal/store/storetest) against PostgreSQL, as internal/store/sqlite runs it
// against SQLite.
func TestContract(t *testing.T) { storetest.All(t, openContract) }

// TestContractQuotas runs the contract's quota scenarios against
// PostgreSQL, as internal/store/sqlite does against SQLite.
func TestContractQuotas(t *testing.T) {
	storetest.Quotas(t, func(t testing.TB, c *storetest.Clock, q host.StoreQuotas) host.Backend {
		return openQuotaNodes(t, c, 1, q)[0]
	})
}

// TestContractNodes runs the contract's scenarios of several nodes on one
// database: claims, schedule slots, sensor dedupe keys, message ids, one
// evidence chain, reads that see other nodes' writes.
func TestContractNodes(t *testing.T) { storetest.Nodes(t, openContractNodes) }

// TestContractEvidenceValues runs the contract's out-of-line value
// scenarios against PostgreSQL, as internal/store/sqlite does against SQLite.
func TestContractEvidenceValues(t *testing.T) {
	storetest.EvidenceValues(t, openContract, storetest.ValueHooks{
		Count: func(t testing.TB, b host.Backend) int {
			var n int
			if err := b.(*Store).pool.QueryRow(ctx, `SELECT count(*) FROM evidence_values`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		Change: func(t testing.TB, b host.Backend, key string, v []byte) {
			if v == nil {
				tamper(t, b.(*Store), `DELETE FROM evidence_values WHERE digest = $1`, key)
				return
			}
			tamper(t, b.(*Store), `UPDATE evidence_values SET value = $1 WHERE digest = $2`, v, key)
		},
	})
}

// TestContractLogKey runs the contract's log key scenario against
// nodes on one PostgreSQL database.
func TestContractLogKey(t *testing.T) {
	dsn := pgtest.DSN(t)
	storetest.LogKey(t, func(t testing.TB, signer *tlog.Signer) (host.Backend, error) {
		s, err := Open(ctx, dsn, Options{SecretKey: testSecretKey, HostKey: testHostKey, LogSigner: signer})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	})
}
