// Package runtime runs packrun node-pack modules under wazero.
//
// A Runtime compiles modules (with an on-disk compilation cache, after a
// pre-check of the module's shape), validates them against host ABI v1
// (exports, every import, ABI version, nodes), and invokes their nodes on
// fresh, prepared instances with memory, wall-clock, output-size, host-call
// and host-memory limits (Limits; Merge is the one place limits combine).
// Whatever a module does, the caller gets a Result — completed, suspended or
// failed with a specific error code — and never a panic or a hang. Every host
// call is recorded in the Result's trace, and an invocation can be replayed
// from one (Invocation.Replay). Extism plugins run through the Extism go-sdk
// under the same rules.
//
// The package does no SQL and no signing, and knows nothing of packs or
// stores: a run's variables and channels (RunState) and the packrun:host/v1
// services — memory, queue, adapters, evidence, artifacts, config — are
// supplied by the caller for each invocation (Services); package packrun binds
// them through internal/dispatch.
package runtime
