// Package pgbench holds benchmarks only (in its _test.go files): packrun's
// PostgreSQL task round trip with 1, 2 and 3 nodes on one database beside
// River v0.51.1 on the same server, directly and through a delaying TCP
// proxy that puts a simulated network round trip between each node and
// the database. River is linked into this package's test binary alone.
//
//	PGTEST_DURABLE=1 go test ./internal/store/postgres/pgbench -run '^$' -bench PGRoundTrip -benchtime 3000x -count 2
package pgbench
