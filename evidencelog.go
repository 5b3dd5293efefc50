package packrun

import (
	"github.com/packrun/packrun/host"
)

// EvidenceLog is the host's Merkle-tree log over its evidence chain
// (host.EvidenceLog): signed checkpoints, inclusion and consistency
// proofs.
func (h *Host) EvidenceLog() host.EvidenceLog { return h.store }

// LogVerifierKey is the signed-note verifier key of the host's evidence
// log checkpoints ("origin+hash+base64key", the origin naming the home:
// packrun.local/ and 16 hex digits of the host key's hash): what an
// auditor needs to check a checkpoint or a proof offline.
func (h *Host) LogVerifierKey() (string, error) { return h.store.LogVerifierKey() }
