// Package storecore holds the rules every store backend applies the same
// way, free of SQL: validating and normalising what the host.Queue and
// host.Evidence operations are given, deciding a settlement's status,
// and checking a chain entry against its link. Both backends call it
// (see RATIONALE.md, "PostgreSQL (issue 18)"), as they do for the rules
// of packs, task type routes, memory puts and API tokens. The sealing of
// secret memory values (SecretKey) is the one format of both backends.
package storecore
