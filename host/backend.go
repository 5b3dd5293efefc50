package host

// Backend is everything one storage backend provides. internal/store/sqlite.Store
// implements it; another backend (a distributed queue and KV) would
// implement the same interfaces.
type Backend interface {
	Evidence
	EvidenceLog
	Memory
	Queue
	Locker
	TaskTypes
	TaskTypeSpecs
	Agents
	Packs
	Schedules
	Sensors
	Workflows
	Runs
	Messages
	// Close flushes acknowledged writes and releases the backend.
	Close() error
}
