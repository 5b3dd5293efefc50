// Package abi is the packrun host ABI v1 contract: the exports a node-pack
// module provides, the imports the host serves, the JSON envelopes exchanged
// through guest memory, the status codes, the error codes the host reports,
// and the version rules.
//
// It is a leaf package: it imports nothing else from this repository, so guest
// SDKs, tools and other hosts can depend on it alone.
//
// # Versions
//
// A major version is a namespace: a breaking change creates a new one
// (packrun:host/v2) and a host may serve several at once. Adding a function
// to a namespace is a minor version; a pack declares the minor it needs and a
// host refuses a pack that needs a newer minor than it serves.
//
// # Buffers
//
// Every (ptr,len) pair may be encoded either as two i32 results (multi-value)
// or as one i64 with ptr in the low 32 bits and len in the high 32 bits
// (packed). The host decides per function from the declared signature.
// Buffers are owned by whoever allocated them; the host frees what a module
// returned with openwop_free, and allocates what it hands to a module with
// openwop_alloc.
//
// # Re-entrancy
//
// The host calls into a module only from the outside: openwop_node_invoke
// and the exports that describe the module, and, from inside a host
// import, the module's openwop_alloc (to hand it the result of a
// (ptr,len) import or a packrun:host/v1 response) and openwop_free. While
// the host is running a module's openwop_alloc or openwop_free, the module
// must not call any openwop or packrun:host/v1 import: such a call would
// make the host call openwop_alloc again from inside itself, without bound.
// A module that does is stopped, and its invocation fails with
// CodeHostReentered. WASI imports stay allowed there (a language runtime's
// allocator may read a clock), since they never call back into the module.
//
// # Envelopes
//
// The request is {"abiVersion":1,"nodeContext":{...},"inputs":...}
// (Request); the response is {"outcome":"completed","output":...},
// {"outcome":"suspended","interrupt":...} or
// {"outcome":"failed","error":{"code","message","details"}} (Response), as
// openwop RFC 0008 has them. A completed response may add "taskOutcome", an
// object of the agent runtime's TaskOutcome fields the node knows
// (operator_summary, file_changes, workflow_signal, follow_up_tasks,
// external_messages; see TaskOutcome): modules that never send it are
// unaffected, and one that sends it wrongly fails with
// CodeResponseTaskOutcome.
package abi
