package storecore

import (
	"slices"
	"testing"
)

// A page's links are read once for the whole page: each read link lands
// around every attempt next to it or at it, first read first, as
// LinksAround.Add places it for one attempt.
func TestPageLinks(t *testing.T) {
	page := []*AttemptRow{{Seq: 7}, {Seq: 5}, {Seq: 4}, {Seq: 0}, {Seq: -2}}
	p := NewPageLinks(page)
	if got := p.Seqs(); !slices.Equal(got, []int64{3, 4, 5, 6, 7, 8}) {
		t.Fatalf("seqs %v", got)
	}
	// Events first, then attempts' rows, as the stores' statements read.
	p.Add(5, ChainLink{Kind: "custom.note", Prev: "p5e", Hash: "h5e"})
	for _, at := range []int64{3, 4, 5, 6, 7, 8} {
		p.Add(at, ChainLink{Prev: "p" + string(rune('0'+at)), Hash: "h" + string(rune('0'+at))})
	}
	for _, tc := range []struct {
		seq                  int64
		before, after, event string // hashes; "" for none
	}{
		{7, "h6", "h8", ""},
		{5, "h4", "h6", "h5e"},
		{4, "h3", "h5e", ""},
	} {
		ls := p.around[tc.seq]
		hash := func(l *ChainLink) string {
			if l == nil {
				return ""
			}
			return l.Hash
		}
		if ls == nil || ls.Seq != tc.seq || hash(ls.Before) != tc.before || hash(ls.After) != tc.after || hash(ls.Event) != tc.event {
			t.Errorf("around %d: %+v", tc.seq, ls)
		}
	}
	if len(p.around) != 3 {
		t.Fatalf("places %d, want only the placed attempts", len(p.around))
	}
}
