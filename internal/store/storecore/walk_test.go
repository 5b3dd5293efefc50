package storecore

import (
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// entries is a ChainWalk.Next over es.
func entries(es ...*ChainEntry) func() (*ChainEntry, error) {
	return func() (*ChainEntry, error) {
		if len(es) == 0 {
			return nil, nil
		}
		e := es[0]
		es = es[1:]
		return e, nil
	}
}

// linked is an event of type typ linked after prev at seq.
func linked(seq int64, typ, prev string) *ChainEntry {
	e := &host.Event{Seq: seq, Type: typ, PrevHash: prev, Data: []byte(`{}`)}
	e.Hash = evidence.HashEvent(e)
	return &ChainEntry{Seq: seq, Ev: e}
}

func TestWalkChainChecks(t *testing.T) {
	one := linked(1, "task_created", evidence.GenesisHash)
	two := linked(2, "task_created", one.Ev.Hash)
	rep := &host.ChainReport{Head: evidence.GenesisHash}
	if brk, err := WalkChain(ChainWalk{Next: entries(one, two)}, rep, nil); brk != nil || err != nil {
		t.Fatalf("a linked chain: %v, %v", brk, err)
	}
	if rep.Events != 2 || rep.HeadSeq != 2 || rep.Head != two.Ev.Hash {
		t.Fatalf("report %+v", rep)
	}
	cases := map[string]struct {
		es   []*ChainEntry
		want string
	}{
		"gap":      {[]*ChainEntry{one, linked(3, "task_created", one.Ev.Hash)}, host.BreakSeqGap},
		"inserted": {[]*ChainEntry{one, {Seq: 1, At: &AttemptRow{Seq: 1, AttemptID: "a1"}}}, ""},
		"prev":     {[]*ChainEntry{one, linked(2, "task_created", evidence.GenesisHash)}, host.BreakPrevHash},
	}
	for name, c := range cases {
		brk, err := WalkChain(ChainWalk{Next: entries(c.es...)}, &host.ChainReport{}, nil)
		if err != nil || brk == nil {
			t.Fatalf("%s: no break (%v)", name, err)
		}
		if c.want != "" && brk.Problem != c.want {
			t.Errorf("%s: problem %q, want %q", name, brk.Problem, c.want)
		}
		if name == "inserted" && brk.AttemptID != "a1" {
			t.Errorf("inserted: break %+v does not name the attempt", brk)
		}
	}
}

func TestDialectEntries(t *testing.T) {
	var a Args
	if got := SQLiteDialect.HasPrefix("pack", "p@", &a); got != "substr(pack, 1, $1) = $2" || a[0] != 2 || a[1] != "p@" {
		t.Errorf("SQLite prefix %q %v", got, a)
	}
	a = nil
	if got := PostgresDialect.HasPrefix("pack", "p@", &a); got != "starts_with(pack, $1)" || a[0] != "p@" {
		t.Errorf("PostgreSQL prefix %q %v", got, a)
	}
	if cond, arg, err := SQLiteDialect.InList([]int64{1, 2}); err != nil || arg != "[1,2]" || cond != "IN (SELECT value FROM json_each($1))" {
		t.Errorf("SQLite list %q %v %v", cond, arg, err)
	}
	if got := SQLiteDialect.DataField("e.data", "tenant"); got != "json_extract(e.data, '$.tenant')" {
		t.Errorf("SQLite field %q", got)
	}
	if got := PostgresDialect.DataField("e.data", "tenant"); got != "(e.data::jsonb ->> 'tenant')" {
		t.Errorf("PostgreSQL field %q", got)
	}
}
