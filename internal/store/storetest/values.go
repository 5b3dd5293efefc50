package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// ValueHooks let the contract look under a backend's attempt values
// stored out of line (evidence.ValueMin bytes or more): each backend's
// test gives them in its own SQL.
type ValueHooks struct {
	// Count is how many values the store holds.
	Count func(t testing.TB, b host.Backend) int
	// Change rewrites the stored value under key (hex SHA-256) to v,
	// behind the store's back; v nil deletes it.
	Change func(t testing.TB, b host.Backend, key string, v []byte)
}

// EvidenceValues checks the large values of attempts: they round-trip
// through every read (Attempt, ListAttempts, EachVerifiedAttempt, an
// exported bundle that verifies offline); a stored value that was changed
// or removed breaks VerifyChain at the attempt that names it, and reading
// that attempt fails as tampered; and a value repeated by many attempts
// is stored once.
func EvidenceValues(t *testing.T, open Opener, hooks ValueHooks) {
	t.Run("LargeValueRoundTrips", func(t *testing.T) {
		f := newFixture(t, open)
		a := largeAttempt("1")
		if err := f.b.RecordAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
		want := *a
		check := func(how string, got *host.Attempt) {
			t.Helper()
			if got == nil || !bytes.Equal(got.Input, want.Input) || !bytes.Equal(got.Output, want.Output) ||
				!bytes.Equal(got.Stdout, want.Stdout) || !bytes.Equal(got.Trace, want.Trace) ||
				got.ContentHash != want.ContentHash || evidence.HashAttempt(got) != want.ContentHash {
				t.Fatalf("%s: the attempt's values did not round-trip: input %v output %v stdout %v trace %v hash %v rehash %v", how, got != nil && bytes.Equal(got.Input, want.Input),
					got != nil && bytes.Equal(got.Output, want.Output), got != nil && bytes.Equal(got.Stdout, want.Stdout), got != nil && bytes.Equal(got.Trace, want.Trace),
					got != nil && got.ContentHash == want.ContentHash, got != nil && evidence.HashAttempt(got) == want.ContentHash)
			}
		}
		got, err := f.b.Attempt(ctx, a.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		check("Attempt", got)
		list, err := f.b.ListAttempts(ctx, host.AttemptFilter{})
		if err != nil || len(list) != 1 {
			t.Fatalf("ListAttempts: %v %d", err, len(list))
		}
		check("ListAttempts", list[0])
		n := 0
		err = f.b.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(got *host.Attempt, verr error) error {
			n++
			if verr != nil {
				t.Fatalf("EachVerifiedAttempt: %v", verr)
			}
			check("EachVerifiedAttempt", got)
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("EachVerifiedAttempt: %v, %d attempts", err, n)
		}
		bun, err := f.b.ExportAttempt(ctx, a.AttemptID)
		if err != nil {
			t.Fatal(err)
		}
		check("ExportAttempt", bun.Attempt)
		raw, _ := json.Marshal(bun)
		back, err := evidence.DecodeBundle(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := evidence.VerifyBundle(back); err != nil {
			t.Fatalf("exported bundle: %v", err)
		}
		back.Attempt.Input[len(back.Attempt.Input)-3] = 'z'
		if evidence.VerifyBundle(back) == nil {
			t.Fatal("a bundle with an edited large value verified")
		}
		// Recording the same attempt again is the no-op it always was.
		again := largeAttempt("1")
		if err := f.b.RecordAttempt(ctx, again); err != nil || again.EventSeq != a.EventSeq {
			t.Fatalf("recorded again: %v (seq %d, first %d)", err, again.EventSeq, a.EventSeq)
		}
		f.verifyChain()
	})
	for _, tc := range []struct {
		name   string
		change []byte
		detail string
	}{{"TamperedValueBreaksVerify", []byte(`{"name":"forged"}`), "no longer matches its digest"}, {"MissingValueBreaksVerify", nil, "is missing"}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, open)
			before := largeAttempt("0")
			before.Input = json.RawMessage(`{"small":true}`) // a value of its own, left alone
			a := largeAttempt("1")
			after := largeAttempt("2") // shares a's values: the first to name one is blamed
			for _, x := range []*host.Attempt{before, a, after} {
				if err := f.b.RecordAttempt(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			f.verifyChain()
			hooks.Change(t, f.b, evidence.HashBytes(a.Input), tc.change)
			rep, err := f.b.VerifyChain(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK || rep.Broken == nil || rep.Broken.AttemptID != a.AttemptID || rep.Broken.Seq != a.EventSeq ||
				rep.Broken.Problem != host.BreakAttemptHash || !strings.Contains(rep.Broken.Detail, tc.detail) || !strings.Contains(rep.Broken.Detail, "input") {
				t.Fatalf("VerifyChain after the value was changed: %+v", rep.Broken)
			}
			if _, err := f.b.Attempt(ctx, a.AttemptID); !errors.Is(err, host.ErrTampered) {
				t.Fatalf("Attempt of a changed value: %v", err)
			}
			if err := f.b.VerifyAttempt(ctx, a.AttemptID); !errors.Is(err, host.ErrTampered) || !strings.Contains(err.Error(), a.AttemptID) {
				t.Fatalf("VerifyAttempt of a changed value: %v", err)
			}
			if err := f.b.VerifyAttempt(ctx, before.AttemptID); err != nil {
				t.Fatalf("an attempt that does not name the value: %v", err)
			}
			var broken []string
			err = f.b.EachVerifiedAttempt(ctx, host.AttemptFilter{}, func(got *host.Attempt, verr error) error {
				if verr != nil {
					if !errors.Is(verr, host.ErrTampered) {
						t.Fatalf("EachVerifiedAttempt: %v", verr)
					}
					broken = append(broken, got.AttemptID)
				}
				return nil
			})
			if err != nil || len(broken) != 2 || broken[0] != after.AttemptID || broken[1] != a.AttemptID {
				t.Fatalf("EachVerifiedAttempt: %v, broken %v", err, broken)
			}
		})
	}
	t.Run("RepeatedValueStoredOnce", func(t *testing.T) {
		f := newFixture(t, open)
		for i := range 5 {
			a := largeAttempt(string(rune('a' + i)))
			if err := f.b.RecordAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		// input, output, stdout and trace, each the same in all five.
		if n := hooks.Count(t, f.b); n != 4 {
			t.Fatalf("%d values stored for 5 attempts sharing 4, want 4", n)
		}
		other := largeAttempt("z")
		other.Output = json.RawMessage(`{"greeting":"` + strings.Repeat("w", evidence.ValueMin) + `"}`)
		if err := f.b.RecordAttempt(ctx, other); err != nil {
			t.Fatal(err)
		}
		if n := hooks.Count(t, f.b); n != 5 {
			t.Fatalf("%d values stored after a new output, want 5", n)
		}
		f.verifyChain()
	})
}

// largeAttempt is an attempt whose input, output, stdout and trace go
// out of line; id tells attempts apart, their values are the same.
func largeAttempt(id string) *host.Attempt {
	return &host.Attempt{AttemptID: "att-large-" + id, Outcome: abi.Completed, Node: "n",
		Input:  json.RawMessage(`{"name":"` + strings.Repeat("x", 10_000) + `"}`),
		Output: json.RawMessage(`{"greeting":"hello, ` + strings.Repeat("x", 10_000) + `"}`),
		Stdout: bytes.Repeat([]byte("log line\n"), 200),
		Trace:  json.RawMessage(`[` + strings.Repeat(`{"fn":"kv.get","ok":true},`, 60) + `{}]`)}
}
