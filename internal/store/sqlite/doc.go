// Package sqlite implements the host services (host.Evidence, host.Memory,
// host.Queue, host.Locker, host.TaskTypes, host.Packs) on packrun's
// embedded SQLite database (WAL, opened by db.go), with artifact bytes and
// installed packs' blobs in two content-addressed blob directories.
//
// All writes go through one writer goroutine per Store that groups queued
// operations into one transaction (group commit) on a connection with
// synchronous=FULL: a method returns only after its batch is durably
// committed, yet concurrent callers share one fsync. An operation that
// fails after writing is undone by rolling the batch back and running the
// others again, so one failing operation never undoes another (see op).
// Memory reads are served from a cache kept coherent across processes (see
// memCache); other reads use the connection pool. Several Stores, in one process or several, may
// share a database: every write transaction is BEGIN IMMEDIATE, which is
// what makes Claim and the hash chain safe across processes.
//
// The database is readable by its owner only, and secret memory values are
// sealed at rest with a key kept in a file apart from it
// (Options.SecretKeyFile; see secrets.go), in storecore.SecretKey's format,
// shared with internal/store/postgres. Rules written once for both backends run
// through the adapter of coretx.go (storecore.Tx).
package sqlite
