// Package postgres is the PostgreSQL backend of the host services (issue
// 18): several `packrun serve` nodes on one database share one task queue
// and one evidence chain.
//
// It implements all of host.Backend, and the rest of what a Host needs
// of its store: the task queue (host.Queue) with per-task leases (claims
// with SELECT … FOR UPDATE SKIP LOCKED, heartbeats, any node reclaiming
// an expired lease, settlements fenced on the lease holder), the dispatch
// lock (host.Locker, now only for singleton chores), the evidence chain
// (attempts, artifacts, events, VerifyChain, VerifyAttempt, exports),
// memory (memory.go), the installed-pack index with its blobs and
// generation (packs.go), task type routes (tasktypes.go), task type
// specs, agents and profiles (agents.go), API tokens and the host key's
// seal (tokens.go), recurring schedules (schedules.go), sensor events
// (sensors.go), workflow records (workflows.go), openwop runs (runs.go)
// and the message bus (messages.go). internal/store/storetest's contract runs
// whole against it (contract_test.go), as against internal/store/sqlite.
// Rules written once for both backends (the schedules', the sensor
// events' refusals and dedupe claim) are storecore's, run through the
// adapter of coretx.go (storecore.Tx).
//
// Storage choices, beside internal/store/sqlite's: times are TEXT in
// host.FormatTime's canonical form (text order is time order, and the
// evidence hashes read them back byte for byte); JSON is TEXT, never
// jsonb, because the chain hashes the exact bytes stored and jsonb would
// reorder keys and normalise numbers; attempt records are BYTEA.
//
// Every write is one transaction (Store.write). Chain entries an operation
// appends are buffered in its transaction and inserted at its end,
// pending, with no lock; the linker (link.go) then gives every node's
// pending entries their places under pg_advisory_xact_lock(ChainLock),
// one pass at a time: one chain across all nodes, as the evidence
// package hashes it.
//
// The chain cannot show that its newest entries were not deleted
// together, so it is anchored outside the database by signed head
// checkpoints (checkpoint.go; the format and checks are
// internal/evidence's, as SQLite's). The database is shared, the anchor
// is not: each node anchors the heads it committed — after each link
// pass, the seq and hash of the last of its own writers' entries the
// pass linked — in a file of its own home
// (Options.CheckpointFile, evidence-head.json), signed with its own host
// key (Options.HostKey). VerifyChain on a node checks the chain against
// that node's anchor: a chain that ends before it, or has another hash
// at its seq, is broken (host.BreakHeadRewound), and so is a checkpoint
// the node's key did not sign (host.BreakCheckpoint). Deleting the
// newest entries is therefore caught by every node that committed one of
// them; a node that committed none of them cannot tell (verify on one
// that did, or pin the head: `evidence verify --head`).
package postgres
