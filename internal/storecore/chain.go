package storecore

import (
	"encoding/json"
	"fmt"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// AttemptRow is an attempt's row as a store keeps it: its record, its
// link in the chain, and copies of the record's header for indexes.
type AttemptRow struct {
	Seq                                        int64
	AttemptID, TaskID, Tenant, Pack, StartedAt string
	Attempt                                    int64
	Record                                     []byte
	Prev, Hash                                 string
}

// CheckAttemptRow checks an attempt's row against the hash of the entry
// before it (prev): its columns against its record, and its record
// against its link in the chain.
func CheckAttemptRow(r *AttemptRow, prev string) *host.ChainBreak {
	brk := func(format string, args ...any) *host.ChainBreak {
		return &host.ChainBreak{Seq: r.Seq, Type: host.EventAttemptRecorded, AttemptID: r.AttemptID, Problem: host.BreakAttemptHash, Detail: fmt.Sprintf(format, args...)}
	}
	if r.Prev != prev {
		return &host.ChainBreak{Seq: r.Seq, Type: host.EventAttemptRecorded, AttemptID: r.AttemptID, Problem: host.BreakPrevHash,
			Detail: fmt.Sprintf("prev_hash %.12s… is not the hash of event %d (%.12s…): the chain was rewritten", r.Prev, r.Seq-1, prev)}
	}
	h, err := evidence.ReadHeader(r.Record)
	if err != nil {
		return brk("attempt %s, recorded at event %d, was changed: its record no longer reads (%v)", r.AttemptID, r.Seq, err)
	}
	if string(h.AttemptID) != r.AttemptID || string(h.TaskID) != r.TaskID || h.Attempt != r.Attempt ||
		string(h.Tenant) != r.Tenant || string(h.Pack) != r.Pack || host.FormatTime(h.StartedAt) != r.StartedAt {
		return brk("attempt %s, recorded at event %d, was changed: its columns no longer match its record", r.AttemptID, r.Seq)
	}
	if h.Version == evidence.RecordV1 {
		return checkLegacyAttempt(r, prev)
	}
	if evidence.LinkAttempt(r.Seq, prev, evidence.HashRecord(r.Record)) != r.Hash {
		return brk("attempt %s, recorded at event %d, was changed after it was recorded: its record no longer matches its hash in the chain", r.AttemptID, r.Seq)
	}
	return nil
}

// checkLegacyAttempt checks an attempt recorded before attempt records:
// its event, as stored then, and its content against the hash the event
// chained.
func checkLegacyAttempt(r *AttemptRow, prev string) *host.ChainBreak {
	a, l, err := evidence.DecodeRecord(r.Record)
	if err != nil {
		return &host.ChainBreak{Seq: r.Seq, Type: host.EventAttemptRecorded, AttemptID: r.AttemptID, Problem: host.BreakAttemptHash,
			Detail: fmt.Sprintf("attempt %s, recorded at event %d, was changed: its record no longer reads (%v)", r.AttemptID, r.Seq, err)}
	}
	ev := evidence.LegacyAttemptEvent(a, l, r.Seq, prev, r.Hash)
	if evidence.HashEvent(ev) != ev.Hash {
		return &host.ChainBreak{Seq: r.Seq, Type: ev.Type, AttemptID: r.AttemptID, Problem: host.BreakEventHash,
			Detail: fmt.Sprintf("event %d (%s) was changed after it was appended: its fields no longer match its hash", r.Seq, ev.Type)}
	}
	var d struct {
		ContentHash string `json:"content_hash"`
	}
	json.Unmarshal(l.EventData, &d)
	if got := evidence.HashAttemptV1(a); got != d.ContentHash || l.ContentHash != d.ContentHash {
		return &host.ChainBreak{Seq: r.Seq, Type: ev.Type, AttemptID: r.AttemptID, Problem: host.BreakAttemptHash,
			Detail: fmt.Sprintf("attempt %s was changed after it was recorded: its content hashes to %.12s…, event %d chained %.12s…", r.AttemptID, got, r.Seq, d.ContentHash)}
	}
	return nil
}

// CheckEventLink checks a stored event against the hash of the entry
// before it (prev) and against its own hash; a stored attempt_recorded
// event is one whose attempt is gone.
func CheckEventLink(ev *host.Event, prev string) *host.ChainBreak {
	brk := func(problem, format string, args ...any) *host.ChainBreak {
		return &host.ChainBreak{Seq: ev.Seq, Type: ev.Type, AttemptID: ev.AttemptID, Problem: problem, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case ev.PrevHash != prev:
		return brk(host.BreakPrevHash, "prev_hash %.12s… is not the hash of event %d (%.12s…): the chain was rewritten", ev.PrevHash, ev.Seq-1, prev)
	case evidence.HashEvent(ev) != ev.Hash:
		return brk(host.BreakEventHash, "event %d (%s) was changed after it was appended: its fields no longer match its hash", ev.Seq, ev.Type)
	case ev.Type == host.EventAttemptRecorded:
		return brk(host.BreakAttemptMissing, "attempt %s, recorded at event %d, is no longer stored", ev.AttemptID, ev.Seq)
	}
	return nil
}

// CheckArtifact compares an artifact's record (nil: none is stored) with
// its artifact_recorded event.
func CheckArtifact(e *host.Event, a *host.Artifact) *host.ChainBreak {
	var d struct {
		ArtifactID   string `json:"artifact_id"`
		SHA256       string `json:"sha256"`
		Size         int64  `json:"size"`
		Role         string `json:"role"`
		RelativePath string `json:"relative_path"`
	}
	json.Unmarshal(e.Data, &d)
	brk := &host.ChainBreak{Seq: e.Seq, Type: e.Type, AttemptID: e.AttemptID, ArtifactID: d.ArtifactID}
	switch {
	case a == nil:
		brk.Problem, brk.Detail = host.BreakArtifactMissing, fmt.Sprintf("artifact %s, recorded at event %d, is no longer stored", d.ArtifactID, e.Seq)
	case a.SHA256 != d.SHA256 || a.Size != d.Size || string(a.Role) != d.Role || a.RelativePath != d.RelativePath || a.TaskID != e.TaskID || a.AttemptID != e.AttemptID:
		brk.Problem, brk.Detail = host.BreakArtifactHash, fmt.Sprintf("artifact %s no longer matches what event %d recorded", d.ArtifactID, e.Seq)
	default:
		return nil
	}
	return brk
}
