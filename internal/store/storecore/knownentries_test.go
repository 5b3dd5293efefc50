package storecore

import (
	"fmt"
	"testing"
)

// KnownEntries hands over the run of entries from next, up to max, and
// lets go of those before it; entries added out of order, or twice,
// are held once and in order; it keeps the newest maxKnown.
func TestKnownEntries(t *testing.T) {
	var k KnownEntries
	k.Add(KnownEntry{3, "c"}, KnownEntry{4, "d"}, KnownEntry{8, "h"})
	k.Add(KnownEntry{7, "g"}, KnownEntry{5, "e"}, KnownEntry{4, "d"}) // placed by writers committing out of order
	if got := fmt.Sprint(k.Held()); got != "[{3 c} {4 d} {5 e} {7 g} {8 h}]" {
		t.Fatalf("held %s", got)
	}
	if got := k.From(2, 10); got != nil {
		t.Fatalf("from 2 (not held): %v", got)
	}
	if got := fmt.Sprint(k.From(4, 10)); got != "[d e]" {
		t.Fatalf("from 4: %s, want [d e] (stops at the gap)", got)
	}
	if h := k.Held(); len(h) != 4 || h[0].Seq != 4 {
		t.Fatalf("held after from 4: %v", h)
	}
	if got := fmt.Sprint(k.From(7, 1)); got != "[g]" {
		t.Fatalf("from 7, max 1: %s", got)
	}
	k.Drop(7)
	if got := fmt.Sprint(k.Held()); got != "[{8 h}]" {
		t.Fatalf("after drop 7: %s", got)
	}
	if got := k.From(9, 10); got != nil || len(k.Held()) != 0 {
		t.Fatalf("from 9: %v, held %v", got, k.Held())
	}
	// Bounded: past maxKnown the oldest go.
	batch := make([]KnownEntry, maxKnown+5)
	for i := range batch {
		batch[i] = KnownEntry{Seq: int64(100 + i), Hash: "x"}
	}
	k.Add(batch...)
	if h := k.Held(); len(h) != maxKnown || h[0].Seq != 105 || h[len(h)-1].Seq != int64(100+maxKnown+4) {
		t.Fatalf("held %d entries from %d to %d", len(h), h[0].Seq, h[len(h)-1].Seq)
	}
}
