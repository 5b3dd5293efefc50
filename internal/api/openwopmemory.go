package api

// agentsCaps is discovery's agents: only memoryBackends, "long-term"
// (openwop's agent memory, on the tenants' key-value memory: the
// conformance-agent-memory-* fixtures, internal/runs/memory.go). Agents
// themselves (agents.supported) are not claimed.
type agentsCaps struct {
	MemoryBackends []string `json:"memoryBackends"`
}

// longTermMemory is discovery's agents block when runs are served: the
// memory fixtures run on every host, whatever packs it holds.
func longTermMemory() *agentsCaps {
	return &agentsCaps{MemoryBackends: []string{"long-term"}}
}
