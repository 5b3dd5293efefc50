// Package runtime runs packrun node-pack modules under wazero.
//
// A Runtime compiles modules (with an on-disk compilation cache), validates
// them against host ABI v1 (exports, every import, ABI version, nodes), and
// invokes their nodes on fresh, prepared instances with memory, wall-clock,
// output-size and host-call limits. Whatever a module does, the caller gets a
// Result — completed, suspended or failed with a specific error code — and
// never a panic or a hang.
//
// The package does no SQL and no signing: host services (run state, and later
// memory, queue, adapters) are supplied by the caller through interfaces.
package runtime
