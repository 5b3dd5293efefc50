// Package postgres is the PostgreSQL backend of the host services (issue
// 18): several `packrun serve` nodes on one database share one task queue
// and one evidence chain.
//
// What it implements so far: the task queue (host.Queue) with per-task
// leases (claims with SELECT … FOR UPDATE SKIP LOCKED, heartbeats, any
// node reclaiming an expired lease, settlements fenced on the lease
// holder), the dispatch lock (host.Locker, now only for singleton
// chores), and the evidence chain's core (attempts, events, VerifyChain,
// VerifyAttempt), memory (memory.go), the installed-pack index with its
// blobs and generation (packs.go), task type routes (tasktypes.go), task
// type specs, agents and profiles (agents.go), and API tokens and the
// host key's seal (tokens.go). The rest of host.Backend is not here yet
// (see the package's README in RATIONALE.md, "PostgreSQL (issue 18)").
//
// Storage choices, beside internal/sqlite's: times are TEXT in
// host.FormatTime's canonical form (text order is time order, and the
// evidence hashes read them back byte for byte); JSON is TEXT, never
// jsonb, because the chain hashes the exact bytes stored and jsonb would
// reorder keys and normalise numbers; attempt records are BYTEA.
//
// Every write is one transaction (Store.write). Chain entries an operation
// appends are buffered in its transaction and linked into the chain at its
// end, under pg_advisory_xact_lock(ChainLock) held until the commit: one
// chain across all nodes, as the evidence package hashes it.
package postgres
