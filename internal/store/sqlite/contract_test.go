package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence/tlog"
	"github.com/packrun/packrun/internal/store/storetest"
)

// openContract is the contract suite's Opener: a fresh store in its own
// temporary directory, on the suite's clock, closed when the test ends.
func openContract(t testing.TB, clock *storetest.Clock) host.Backend {
	t.Helper()
	return openQuotaContract(t, clock, nil)
}

// openQuotaContract is openContract applying q (storetest.QuotaOpener).
func openQuotaContract(t testing.TB, clock *storetest.Clock, q host.StoreQuotas) host.Backend {
	t.Helper()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "packrun.db"), Options{Now: clock.Now, Quotas: q})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// TestContract runs the backend-agnostic store contract
// (internal/store/storetest) against SQLite, one area per subtest.
func TestContract(t *testing.T) { storetest.All(t, openContract) }

// TestContractQuotas runs the contract's quota scenarios against SQLite.
func TestContractQuotas(t *testing.T) { storetest.Quotas(t, openQuotaContract) }

// openContractNodes opens n stores on one fresh database file, as n
// processes sharing a home would.
func openContractNodes(t testing.TB, clock *storetest.Clock, n int) []host.Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "packrun.db")
	var out []host.Backend
	for range n {
		s, err := Open(ctx, path, Options{Now: clock.Now})
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

// TestContractNodes runs the contract's cross-process scenarios against
// three Stores on one SQLite file.
func TestContractNodes(t *testing.T) { storetest.Nodes(t, openContractNodes) }

// TestContractEvidenceValues runs the contract's out-of-line value
// scenarios against SQLite.
func TestContractEvidenceValues(t *testing.T) {
	storetest.EvidenceValues(t, openContract, storetest.ValueHooks{
		Count: func(t testing.TB, b host.Backend) int {
			var n int
			if err := b.(*Store).db.QueryRow(`SELECT count(*) FROM evidence_values`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
		Change: func(t testing.TB, b host.Backend, key string, v []byte) {
			db := b.(*Store).db
			for _, q := range []string{`DROP TRIGGER evidence_values_no_update`, `DROP TRIGGER evidence_values_no_delete`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			q, args := `UPDATE evidence_values SET value = ? WHERE digest = ?`, []any{v, key}
			if v == nil {
				q, args = `DELETE FROM evidence_values WHERE digest = ?`, []any{key}
			}
			if res, err := db.Exec(q, args...); err != nil {
				t.Fatal(err)
			} else if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("%s: %d rows", q, n)
			}
		},
	})
}

// TestContractLogKey runs the contract's log key scenario against
// Stores on one SQLite file.
func TestContractLogKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "packrun.db")
	storetest.LogKey(t, func(t testing.TB, signer *tlog.Signer) (host.Backend, error) {
		s, err := Open(ctx, path, Options{LogSigner: signer})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { s.Close() })
		return s, nil
	})
}
