// Package pgbench holds benchmarks only (in its _test.go files): packrun's
// PostgreSQL task round trip with 1, 2 and 3 nodes on one database beside
// River v0.51.1 on the same server, directly and through a delaying TCP
// proxy that puts a simulated network round trip between each node and
// the database. River is linked into this package's test binary alone.
//
//	go test -c -o /tmp/pgbench.test ./internal/store/postgres/pgbench
//	cd internal/store/postgres/pgbench
//	for i in 1 2 3; do PGTEST_DURABLE=1 /tmp/pgbench.test -test.run '^$' -test.bench PGRoundTrip -test.benchtime 2000x; done
package pgbench
