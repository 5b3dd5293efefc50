// Package storetest is the store contract: the tests of the storage
// interfaces in host (those host.Backend gathers), written once against
// the interfaces alone, so that every backend runs the same ones and
// passes or fails them the same way.
//
// # Plugging a backend in
//
// A backend's test package calls All (or one area function: Queue,
// Evidence, Memory, Locker, Schedules, Sensors, Messages, TaskTypes,
// TaskTypeSpecs, Agents, Packs, Workflows, Runs) with an Opener:
//
//	func TestContract(t *testing.T) {
//		storetest.All(t, func(t testing.TB, clock *storetest.Clock) host.Backend {
//			b := openFreshStore(t, clock.Now) // empty, its now is clock.Now
//			t.Cleanup(func() { b.Close() })
//			return b
//		})
//	}
//
// and Nodes, the scenarios of several processes on one database, with a
// NodesOpener that opens n stores on one fresh database.
//
// internal/store/sqlite/contract_test.go opens a SQLite store in t.TempDir()
// (sqlite.Options{Now: clock.Now}); internal/store/postgres/contract_test.go
// does the same on a fresh database of pgtest's server. The Opener is
// called once per scenario (each a subtest) and must return an empty
// store: no tasks, events, packs or schedules, only what every store is
// created with (the built-in goal-loop workflow definition). Every time
// the store reads as now must come from the clock; the tests move it
// (Clock.Add, Clock.Set) to make TTLs, delays, backoffs, leases and
// schedule slots come due, in whole milliseconds.
//
// # What a scenario checks
//
// Results and their ordering, errors by their sentinel (errors.Is
// host.ErrNotFound, ErrValidation with the field named, ErrConflict,
// ErrEmpty, ErrLocked, ...), the runtime events each write appends (their
// types and order, in the same write), tenant isolation, TTLs against the
// clock, idempotence and dedupe (schedule slots, sensor dedupe keys,
// message ids, attempts, artifacts, pack installs), and concurrency
// within one store (goroutines claiming, firing, recording at once) and
// across stores on one database (Nodes: claims, schedule slots, dedupe,
// one chain, the dispatch lock, reads that see the other nodes' writes).
// After each scenario the whole evidence chain must verify (VerifyChain)
// and every event read back must be numbered from 1 without a gap, linked
// to the entry before it and hashed as internal/evidence hashes it. A
// store anchors the head it committed in a signed checkpoint outside the
// database, while it runs (Evidence's HeadAnchored; in Nodes, every node
// that committed): the opener must give it one (SQLite's sits beside its
// database; PostgreSQL's needs Options.CheckpointFile and HostKey).
//
// Left to each backend's own tests: what only it has (SQLite's files,
// triggers, cache internals, crash recovery, disk-full handling,
// tampering with its rows, and so what its head checkpoint catches) and its configured limits
// (memory value and namespace sizes, artifact size, the retry backoff's
// length: the contract only says a retry waits).
package storetest
