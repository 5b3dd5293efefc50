package api

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// What discovery advertises beyond the Wasm runtime, in openwop's terms,
// each only where it works: replay (mode "replay" of :fork) and the
// audit-log-integrity profile over the evidence log (GET /v1/audit/verify).

// auditProfile is openwop's audit-log-integrity profile (auth-profiles.md).
const auditProfile = "openwop-audit-log-integrity"

// replayCaps is discovery's replay (profiles.md openwop-replay-fork).
type replayCaps struct {
	Supported bool     `json:"supported"`
	Modes     []string `json:"modes"`
}

// authCaps is discovery's auth: the profiles claimed.
type authCaps struct {
	Profiles          []string            `json:"profiles"`
	AuditLogIntegrity *auditIntegrityCaps `json:"auditLogIntegrity,omitempty"`
}

// auditIntegrityCaps is auth.auditLogIntegrity: the evidence chain is a
// hash chain, its log's checkpoints are Ed25519 signed notes opened by
// the verifier key.
type auditIntegrityCaps struct {
	HashChain                    bool   `json:"hashChain"`
	CheckpointSignatureAlgorithm string `json:"checkpointSignatureAlgorithm"`
	CheckpointPublicKey          string `json:"checkpointPublicKey"`
}

// advertise adds to d what the host serves beyond the Wasm runtime: the
// audit profile only when the evidence log signs its checkpoints.
func (s *server) advertise(ctx context.Context, d *openwopDiscovery) error {
	d.Replay = replayCaps{Supported: true, Modes: []string{"replay"}}
	d.Agents = longTermMemory()
	if s.cfg.Backend == nil {
		return nil
	}
	s.advertiseRegistry(d)
	vkey, err := s.cfg.Backend.LogVerifierKey()
	if err != nil || vkey == "" {
		return err
	}
	d.Auth = &authCaps{Profiles: []string{auditProfile},
		AuditLogIntegrity: &auditIntegrityCaps{HashChain: true, CheckpointSignatureAlgorithm: "ed25519", CheckpointPublicKey: vkey}}
	return nil
}

// auditVerify is the answer to GET /v1/audit/verify.
type auditVerify struct {
	FromSeq     int64             `json:"fromSeq"`
	ToSeq       int64             `json:"toSeq"`
	ChainValid  bool              `json:"chainValid"`
	Checkpoints []auditCheckpoint `json:"checkpoints"`
	Anomalies   []auditAnomaly    `json:"anomalies"`
}

// auditCheckpoint is the evidence log's newest signed checkpoint.
type auditCheckpoint struct {
	Size       uint64 `json:"size"`
	Checkpoint string `json:"checkpoint"`
	MerkleRoot string `json:"merkleRoot"`
	Signature  string `json:"signature"`
}

// auditAnomaly is a broken link of the evidence chain: where and what
// (host.Break*), not its detail, which may name another tenant's record.
type auditAnomaly struct {
	Seq     int64  `json:"seq"`
	Problem string `json:"problem"`
}

// seqParam reads an optional non-negative event seq (def when absent).
func seqParam(r *http.Request, name string, def int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, refuse(http.StatusBadRequest, CodeInvalid, name, fmt.Sprintf("%s: must be an event seq, an integer from 0", name))
	}
	return n, nil
}

// auditVerifyRange is GET /v1/audit/verify?fromSeq=&toSeq=: the evidence
// chain walked whole (the range is part of it; toSeq defaults to its
// head), chainValid and its first broken link as an anomaly, and the
// log's newest signed checkpoint.
func (s *server) auditVerifyRange(w http.ResponseWriter, r *http.Request) error {
	from, err := seqParam(r, "fromSeq", 0)
	if err != nil {
		return err
	}
	to, err := seqParam(r, "toSeq", -1)
	if err != nil {
		return err
	}
	if to >= 0 && from > to {
		return refuse(http.StatusBadRequest, CodeInvalid, "fromSeq", fmt.Sprintf("fromSeq: %d is after toSeq, %d", from, to))
	}
	rep, err := s.cfg.Backend.VerifyChain(r.Context())
	if err != nil {
		return err
	}
	if to < 0 {
		to = rep.HeadSeq
	}
	out := auditVerify{FromSeq: from, ToSeq: to, ChainValid: rep.OK, Checkpoints: []auditCheckpoint{}, Anomalies: []auditAnomaly{}}
	if b := rep.Broken; b != nil {
		out.Anomalies = append(out.Anomalies, auditAnomaly{Seq: b.Seq, Problem: b.Problem})
	}
	cp, err := s.newestCheckpoint(r.Context())
	if err != nil {
		return err
	}
	out.Checkpoints = append(out.Checkpoints, auditCheckpoint{Size: cp.Size, Checkpoint: cp.Note,
		MerkleRoot: base64.StdEncoding.EncodeToString(cp.Root), Signature: noteSignature(cp.Note)})
	reply(w, http.StatusOK, out)
	return nil
}

// noteSignature is the base64 signature of a signed note's first
// signature line ("— name base64"), "" when it has none.
func noteSignature(note string) string {
	_, sigs, ok := strings.Cut(note, "\n\n")
	if !ok {
		return ""
	}
	for line := range strings.SplitSeq(sigs, "\n") {
		if rest, ok := strings.CutPrefix(line, "— "); ok {
			if _, sig, ok := strings.Cut(rest, " "); ok {
				return sig
			}
		}
	}
	return ""
}
