package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
	_ = json.Unmarshal(l.EventData, &d) // not JSON: d stays empty and the check below fails
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
	_ = json.Unmarshal(e.Data, &d) // not JSON: d stays empty and the checks below fail
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

// InsertedAttempt is the break of an attempt claiming place seq in the
// chain, which an event of type kind holds.
func InsertedAttempt(attemptID string, seq int64, kind string) *host.ChainBreak {
	return &host.ChainBreak{Seq: seq, AttemptID: attemptID, Problem: host.BreakAttemptUnchain,
		Detail: fmt.Sprintf("attempt %s claims place %d in the chain, which event %d (%s) holds: it was inserted behind the chain's back", attemptID, seq, seq, kind)}
}

// UnplacedAttempt is the break of an attempt's row that has no place in
// the chain (seq 0), nil if it has one.
func UnplacedAttempt(r *AttemptRow) *host.ChainBreak {
	if r.Seq > 0 {
		return nil
	}
	return &host.ChainBreak{AttemptID: r.AttemptID, Problem: host.BreakAttemptUnchain,
		Detail: fmt.Sprintf("attempt %s is stored but no place in the chain is its", r.AttemptID)}
}

// ChainLink is an entry's link as stored: Kind is its event's type, ""
// for an attempt's row.
type ChainLink struct {
	Kind, Prev, Hash string
}

// LinksAround are the stored links next to an attempt's place Seq: before
// and after it, and an event claiming the same place. A store reads the
// rows of both tables at Seq-1, Seq and Seq+1 and hands each to Add.
type LinksAround struct {
	Seq                  int64
	Before, After, Event *ChainLink
}

// Add places l, read at seq at (the first one read at each place counts).
func (ls *LinksAround) Add(at int64, l ChainLink) {
	switch {
	case at == ls.Seq-1 && ls.Before == nil:
		ls.Before = &l
	case at == ls.Seq+1 && ls.After == nil:
		ls.After = &l
	case at == ls.Seq && l.Kind != "":
		ls.Event = &l
	}
}

// CheckAttemptPlace checks an attempt's row (placed: UnplacedAttempt is
// nil) against the links around its place, and, when nothing follows it,
// against anchor, the store's checkpoint (nil if none): the checks of
// host.Evidence.VerifyAttempt.
func CheckAttemptPlace(r *AttemptRow, ls *LinksAround, anchor *host.ChainHead) *host.ChainBreak {
	if ls.Event != nil {
		return InsertedAttempt(r.AttemptID, r.Seq, ls.Event.Kind)
	}
	prev := evidence.GenesisHash
	if r.Seq > 1 {
		if ls.Before == nil {
			return &host.ChainBreak{Seq: r.Seq - 1, Problem: host.BreakSeqGap, Detail: fmt.Sprintf("event %d, before attempt %s, is missing: events were removed", r.Seq-1, r.AttemptID)}
		}
		prev = ls.Before.Hash
	}
	if brk := CheckAttemptRow(r, prev); brk != nil {
		return brk
	}
	if next := ls.After; next != nil {
		if next.Prev != r.Hash {
			return &host.ChainBreak{Seq: r.Seq, Type: host.EventAttemptRecorded, AttemptID: r.AttemptID, Problem: host.BreakAttemptHash,
				Detail: fmt.Sprintf("attempt %s, recorded at event %d, was changed after it was recorded: event %d no longer follows it (its hash was recomputed to match)", r.AttemptID, r.Seq, r.Seq+1)}
		}
	} else if anchor != nil {
		// Nothing follows it to check its link against: the checkpoint
		// may have anchored it.
		return evidence.CheckAnchoredAttempt(anchor, r.AttemptID, r.Seq, r.Hash)
	}
	return nil
}

// PageLinks are the links around the places of a page of attempts' rows
// (host.Evidence.EachVerifiedAttempt): a store reads, in one statement,
// the links of both tables at every place Seqs names and hands each to
// Add, in the order LinksAround.Add expects (events before attempts).
type PageLinks struct {
	around map[int64]*LinksAround
}

// NewPageLinks is the empty PageLinks of a page.
func NewPageLinks(page []*AttemptRow) *PageLinks {
	p := &PageLinks{around: make(map[int64]*LinksAround, len(page))}
	for _, r := range page {
		if r.Seq > 0 {
			p.around[r.Seq] = &LinksAround{Seq: r.Seq}
		}
	}
	return p
}

// Seqs are the places whose links the page needs (seq-1, seq and seq+1
// of each placed attempt), in ascending order, each once.
func (p *PageLinks) Seqs() []int64 {
	seen := make(map[int64]bool, 3*len(p.around))
	out := make([]int64, 0, 3*len(p.around))
	for seq := range p.around {
		for at := seq - 1; at <= seq+1; at++ {
			if !seen[at] {
				seen[at] = true
				out = append(out, at)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Add places l, read at seq at, around every attempt of the page next to
// it or at it.
func (p *PageLinks) Add(at int64, l ChainLink) {
	for seq := at - 1; seq <= at+1; seq++ {
		if ls := p.around[seq]; ls != nil {
			ls.Add(at, l)
		}
	}
}

// VerifyPage checks each attempt's row of page as
// host.Evidence.VerifyAttempt does (links: the links around each place;
// anchor: the store's checkpoint, read once for the pass), decodes it and
// hands it to fn with what the check found (nil, or a *host.ChainBreak).
// A record that reads but does not decode is a break too; its attempt is
// then handed over with its id alone. When the row checks out, its values
// out of line are read (read) and checked against their digests.
func VerifyPage(ctx context.Context, page []*AttemptRow, links *PageLinks, anchor *host.ChainHead, read ValueReader, fn func(*host.Attempt, error) error) error {
	for _, r := range page {
		var verr error
		if brk := UnplacedAttempt(r); brk != nil {
			verr = brk
		} else if brk := CheckAttemptPlace(r, links.around[r.Seq], anchor); brk != nil {
			verr = brk
		}
		a, _, refs, err := evidence.DecodeRecordRefs(r.Record)
		if err != nil {
			a = &host.Attempt{AttemptID: r.AttemptID}
			if verr == nil { // a record that reads but does not decode
				verr = &host.ChainBreak{Seq: r.Seq, Type: host.EventAttemptRecorded, AttemptID: r.AttemptID, Problem: host.BreakAttemptHash,
					Detail: fmt.Sprintf("attempt %s, recorded at event %d, no longer decodes: %v", r.AttemptID, r.Seq, err)}
			}
		}
		a.EventSeq = r.Seq
		if verr == nil {
			// Its values out of line, each checked against its digest.
			if verr = FillValues(ctx, read, a, refs); verr != nil && !errors.Is(verr, host.ErrTampered) {
				return host.Wrap("verify attempts", a.AttemptID, verr)
			}
		}
		if err := fn(a, verr); err != nil {
			return err
		}
	}
	return nil
}
