package postgres

import (
	"bytes"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/pgtest"
	"github.com/packrun/packrun/internal/storetest"
)

// partialBackend is a test-only host.Backend over a *Store that does not
// implement all of it yet: the interfaces other work adds (schedules,
// sensors, workflows, runs, messages) are nil, so the contract's areas
// for them must not be run on it (they would panic).
type partialBackend struct {
	*Store
	host.Schedules
	host.Sensors
	host.Workflows
	host.Runs
	host.Messages
}

// testSecretKey seals the contract stores' secret memory values.
var testSecretKey = bytes.Repeat([]byte{7}, 32)

// openContract is the contract suite's Opener: a store on a fresh
// database, on the suite's clock, closed when the test ends.
func openContract(t testing.TB, clock *storetest.Clock) host.Backend {
	t.Helper()
	s, err := Open(ctx, pgtest.DSN(t), Options{Now: clock.Now, SecretKey: testSecretKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return partialBackend{Store: s}
}

// TestContract runs the areas of the backend-agnostic store contract
// (internal/storetest) this backend implements, against PostgreSQL.
func TestContract(t *testing.T) {
	for _, a := range storetest.Areas {
		switch a.Name {
		case "Memory", "TaskTypes", "TaskTypeSpecs", "Agents", "Packs":
			t.Run(a.Name, func(t *testing.T) { a.Run(t, openContract) })
		}
	}
}
