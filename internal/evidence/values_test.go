package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// largeAttempt is fullAttempt with its input, output and stdout at least
// ValueMin bytes (the output twice the input's content), so its record is
// version 3.
func largeAttempt() *host.Attempt {
	a := fullAttempt()
	a.Input = json.RawMessage(`{"name":"` + strings.Repeat("x", ValueMin) + `"}`)
	a.Output = json.RawMessage(`{"greeting":"` + strings.Repeat("y", 2*ValueMin) + `"}`)
	a.Stdout = bytes.Repeat([]byte{0}, ValueMin) // exactly the threshold: out of line
	a.Stderr = bytes.Repeat([]byte{1}, ValueMin-1)
	return a
}

// fill puts each ref's value from a into back, as a store does.
func fill(t *testing.T, back, a *host.Attempt, refs []Ref) {
	t.Helper()
	for _, r := range refs {
		if err := FillValue(back, r, *valueFields(a)[r.Field]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLargeValuesOutOfLine(t *testing.T) {
	a := largeAttempt()
	var vs Values
	rec, vals := vs.AppendRecord(nil, a, nil)
	if rec[0] != RecordV3 {
		t.Fatalf("version %d, want 3", rec[0])
	}
	if len(rec) >= ValueMin+len(a.Stderr) {
		t.Fatalf("record of %d bytes: the large values are inline", len(rec))
	}
	if got := len(vals); got != 3 {
		t.Fatalf("%d values to store, want 3 (input, output, stdout)", got)
	}
	for _, v := range vals {
		if sum := sha256.Sum256(v.Data); fmt.Sprintf("%x", sum) != v.Key {
			t.Fatalf("value %s keyed %s", fmt.Sprintf("%x", sum), v.Key)
		}
	}
	if !bytes.Equal(rec, AppendRecord(nil, a)) || HashRecord(rec) != HashAttempt(a) {
		t.Fatal("the cached and the plain encoding differ")
	}
	back, l, refs, err := DecodeRecordRefs(rec)
	if err != nil || l != nil || len(refs) != 3 {
		t.Fatalf("decode: %v %v %d refs", err, l, len(refs))
	}
	if back.Input != nil || back.Output != nil || back.Stdout != nil || len(back.Stderr) != ValueMin-1 {
		t.Fatal("the values out of line were not left to FillValue")
	}
	fill(t, back, a, refs)
	want := *a
	want.ContentHash = HashRecord(rec)
	if !reflect.DeepEqual(back, &want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, &want)
	}
	if !CheckAttempt(back) {
		t.Fatal("CheckAttempt refuses the attempt as recorded")
	}
	// The hash commits to every value: one byte changed anywhere changes it.
	c := *a
	c.Output = append(json.RawMessage(nil), a.Output...)
	c.Output[len(c.Output)-3] = 'z'
	if HashAttempt(&c) == HashAttempt(a) {
		t.Fatal("a value out of line is not in the hash")
	}
	// A stored value that was changed, or cut, is refused.
	bad := bytes.Clone(a.Input)
	bad[10] = 'q'
	for name, v := range map[string][]byte{"changed": bad, "cut": a.Input[:len(a.Input)-1], "missing": nil} {
		if err := FillValue(&host.Attempt{}, refs[0], v); err == nil {
			t.Errorf("%s value accepted", name)
		}
	}
}

func TestSmallAttemptsKeepVersion2(t *testing.T) {
	// An attempt without a large value is recorded as before: its hash is
	// the one TestCanonicalHashesAreStable pins.
	a := fullAttempt()
	var vs Values
	rec, vals := vs.AppendRecord(nil, a, nil)
	if rec[0] != RecordV2 || len(vals) != 0 {
		t.Fatalf("version %d with %d values", rec[0], len(vals))
	}
}

func TestValuesHashedAndStoredOnce(t *testing.T) {
	var vs Values
	a := largeAttempt()
	rec1, vals := vs.AppendRecord(nil, a, nil)
	if len(vals) != 3 {
		t.Fatalf("first record: %d values to store", len(vals))
	}
	// Not yet durable: the next record of the same values still writes them.
	if _, again := vs.AppendRecord(nil, a, nil); len(again) != 3 {
		t.Fatalf("before Stored: %d values to store, want 3", len(again))
	}
	vs.Stored(vals)
	b := largeAttempt() // equal values in other slices
	b.AttemptID = "att-other"
	rec2, vals2 := vs.AppendRecord(nil, b, nil)
	if len(vals2) != 0 {
		t.Fatalf("after Stored: %d values to store, want 0", len(vals2))
	}
	if !bytes.Equal(rec2, AppendRecord(nil, b)) || bytes.Equal(rec1, rec2) {
		t.Fatal("the remembered digests give another record")
	}
	// Same length, other bytes: recognized by content, not by shape.
	c := largeAttempt()
	c.Input = bytes.Clone(c.Input)
	c.Input[12] = 'w'
	_, vals3 := vs.AppendRecord(nil, c, nil)
	if len(vals3) != 1 || !bytes.Equal(vals3[0].Data, c.Input) {
		t.Fatalf("a changed value: %d values to store", len(vals3))
	}
}

func TestDecodeRecordV3Refuses(t *testing.T) {
	good := AppendRecord(nil, largeAttempt())
	noRefs := append([]byte{RecordV3}, AppendRecord(nil, fullAttempt())[1:]...)
	for name, rec := range map[string][]byte{
		"digest cut short":     good[:len(good)-1],
		"no value out of line": noRefs,
	} {
		if _, _, err := DecodeRecord(rec); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// alreadyCompactBytewise is alreadyCompact as it was before it scanned
// with bytes.IndexByte: the anchor of BenchmarkAlreadyCompact and a second
// opinion for TestAlreadyCompactAgrees.
func alreadyCompactBytewise(raw []byte) bool {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '<', '>', '&', 0xE2:
			return false
		case '"':
			inString = !inString
		case '\\':
			if inString {
				i++
			}
		case ' ', '\t', '\n', '\r':
			if !inString {
				return false
			}
		}
	}
	return true
}

func TestAlreadyCompactAgrees(t *testing.T) {
	for _, s := range []string{`{"a":1}`, `{"a": 1}`, `{"s":"a b"}`, `["\\"  ,"x\" y"]`, `["\\\\"," "]`, `["\\\\" ,""]`, `"a\`, `"<&>"`,
		"\"\u2029\"", `{"a"`, `null`, `"\\\""  `, `{"greeting":"Hello, ` + strings.Repeat("x", 10_000) + `!"}`, "[1,\n2]", `"\\\\\""`} {
		if valid := json.Valid([]byte(s)); valid && alreadyCompact([]byte(s)) != alreadyCompactBytewise([]byte(s)) {
			t.Errorf("%.40q: %v, the byte-wise scan says %v", s, alreadyCompact([]byte(s)), alreadyCompactBytewise([]byte(s)))
		}
	}
}

// BenchmarkAlreadyCompact: the dispatcher's check of a 10 KB input and
// its greeting, beside the byte-wise scan it replaced.
func BenchmarkAlreadyCompact(b *testing.B) {
	in := []byte(`{"name":"` + strings.Repeat("x", 10_000) + `"}`)
	out := []byte(`{"greeting":"Hello, ` + strings.Repeat("x", 10_000) + `!"}`)
	for _, f := range []struct {
		name string
		fn   func([]byte) bool
	}{{"indexbyte", alreadyCompact}, {"bytewise", alreadyCompactBytewise}} {
		b.Run(f.name, func(b *testing.B) {
			for b.Loop() {
				if !f.fn(in) || !f.fn(out) {
					b.Fatal("not compact")
				}
			}
		})
	}
}
