// Package host will hold the host services a pack reaches through
// packrun:host/v1 (evidence, memory, task queue, adapters) behind small
// interfaces, with their SQLite implementation in host/sqlite, and the
// dispatcher that turns tasks into invocations.
//
// Status: not built yet. Today the runtime serves the openwop namespace only,
// with run state supplied through runtime.RunState.
package host
