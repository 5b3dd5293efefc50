// Package adapters runs the host adapters a skill reaches through
// adapter_invoke: local scripts, a local LLM over Ollama's /api/generate, and
// CLI agent harnesses (claude-code, codex, hermes-agent), configured in
// $PACKRUN_HOME/adapters.json with the AdapterConfig shape of the agent
// runtime schema.
//
// Every invocation is checked against the pack's adapter grant before
// anything runs, and every kind produces the same evidence record, a Call,
// whose stdout and stderr are kept in files under the registry's evidence
// directory. Commands run without a shell, with only their configured
// environment (plus PATH), in their own process group, which is killed when
// the call ends. Untrusted sizes are bounded by the limits in limits.go.
package adapters
