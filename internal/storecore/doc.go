// Package storecore holds the rules every store backend applies the same
// way, free of SQL: validating and normalising what the host.Queue and
// host.Evidence operations are given, deciding a settlement's status,
// and checking a chain entry against its link. internal/postgres uses
// it; internal/sqlite has its own copies of the same code, written first,
// which can move here (see RATIONALE.md, "PostgreSQL (issue 18)"). The
// rules of packs, task type routes, memory puts and API tokens are here
// for both backends already; the sealing of secret memory values
// (SecretKey) is internal/sqlite's format, of which it keeps its copy.
package storecore
