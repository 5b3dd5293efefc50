// Package witness is a C2SP tlog-witness: a small server, holding its own
// Ed25519 key, that cosigns a log's checkpoint (C2SP tlog-cosignature,
// cosignature/v1) only after checking a consistency proof from the last
// checkpoint it cosigned for that log, so a log that forks or rolls back
// cannot get a second cosignature. Its state (per origin: the last cosigned
// size and root hash) is made durable before it answers. The client side
// (Client.AddCheckpoint, VerifyCosignature) is what a log and an auditor use.
// It depends on no store: the state is a directory of small files.
package witness
