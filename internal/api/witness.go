package api

import "net/http"

// CosignedCheckpoint is GET /v1/evidence/checkpoint/cosigned: the newest
// evidence log checkpoint a witness cosigned (serve --witness), the note
// with every cosignature line of it, and what serve knows of each
// witness.
type CosignedCheckpoint struct {
	// Checkpoint is the signed note (C2SP tlog-checkpoint) with the
	// witnesses' cosignature lines (C2SP tlog-cosignature) appended.
	Checkpoint string          `json:"checkpoint"`
	Witnesses  []WitnessStatus `json:"witnesses"`
}

// WitnessStatus is what serve knows of one witness.
type WitnessStatus struct {
	URL string `json:"url"`
	// Size is the size of the newest checkpoint it cosigned.
	Size uint64 `json:"size"`
	// Refusals counts its refusals since serve started.
	Refusals uint64 `json:"refusals"`
	// Problem says why the last send failed; Refused that the witness
	// refused it (a fork, a rollback, an unknown key).
	Problem string `json:"problem,omitempty"`
	Refused bool   `json:"refused,omitempty"`
}

// Witnessing is what serve --witness gives the API.
type Witnessing interface {
	// Cosigned is the newest cosigned checkpoint (nil: none yet).
	Cosigned() []byte
	// Witnesses reports each witness.
	Witnesses() []WitnessStatus
}

func (s *server) cosignedCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Witnessing == nil {
		return refuse(http.StatusNotFound, CodeNotFound, "", "this server sends its checkpoints to no witness (serve --witness URL=VKEY)")
	}
	note := s.cfg.Witnessing.Cosigned()
	if note == nil {
		return refuse(http.StatusNotFound, CodeNotFound, "", "no witness has cosigned a checkpoint of this log yet")
	}
	reply(w, http.StatusOK, CosignedCheckpoint{Checkpoint: string(note), Witnesses: s.cfg.Witnessing.Witnesses()})
	return nil
}
