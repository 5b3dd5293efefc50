package evidence

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// fullAttempt has every field of an attempt set, in stored form.
func fullAttempt() *host.Attempt {
	t0 := time.Date(2026, 11, 24, 1, 2, 3, 456789012, time.UTC)
	return &host.Attempt{
		AttemptID: "att-1", TaskID: "task-1", RunnerID: "runner", Pack: "local.demo@1.0.0", ModuleSHA256: "ab",
		Node: "demo.node", Tenant: "acme", RunID: "run-1", Attempt: 3, ABIVersion: "1.0",
		Input: json.RawMessage(`{"q":"\u003chi\u003e"}`), Output: json.RawMessage(`{"a":1}`), Interrupt: json.RawMessage(`{"i":1}`),
		Outcome: abi.Failed, Error: &abi.Error{Code: "c", Message: "m", Details: json.RawMessage(`{"d":[1]}`)},
		ExitStatus: host.ExitTimeout, RetryClass: host.RetryRetryable, Stdout: []byte("out\x00"), Stderr: []byte{0xff},
		Logs: json.RawMessage(`[{"level":"info"}]`), Events: json.RawMessage(`[{"type":"cap.breached"}]`),
		Trace: json.RawMessage(`[{"fn":"f"}]`), Limits: json.RawMessage(`{"memoryBytes":1}`),
		AdapterCalls: json.RawMessage(`[{"adapter":"a"}]`), Diagnostics: json.RawMessage(`{"hostCalls":2}`),
		StartedAt: t0, EndedAt: t0.Add(time.Millisecond),
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, a := range []*host.Attempt{fullAttempt(), {AttemptID: "att-2", Outcome: abi.Completed, StartedAt: time.Unix(0, 0).UTC(), EndedAt: time.Unix(-5, 7).UTC()}} {
		rec := AppendRecord(nil, a)
		if len(rec) > RecordSize(a) {
			t.Errorf("record of %d bytes, RecordSize said %d", len(rec), RecordSize(a))
		}
		back, l, err := DecodeRecord(rec)
		if err != nil || l != nil {
			t.Fatalf("decode: %v %v", err, l)
		}
		want := *a
		want.ContentHash = HashRecord(rec)
		if !reflect.DeepEqual(back, &want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", back, &want)
		}
		if HashAttempt(a) != back.ContentHash {
			t.Fatal("HashAttempt differs from the record's hash")
		}
		h, err := ReadHeader(rec)
		if err != nil || string(h.AttemptID) != a.AttemptID || string(h.TaskID) != a.TaskID || string(h.Tenant) != a.Tenant ||
			string(h.Pack) != a.Pack || h.Attempt != int64(a.Attempt) || !h.StartedAt.Equal(a.StartedAt) || h.Version != RecordV2 {
			t.Fatalf("header %+v %v", h, err)
		}
	}
}

func TestLegacyRecordRoundTrip(t *testing.T) {
	a := fullAttempt()
	a.ContentHash = HashAttemptV1(a)
	l := Legacy{ContentHash: a.ContentHash, EventTime: a.EndedAt, EventData: []byte(`{"content_hash":"x"}`)}
	rec := AppendLegacyRecord(nil, a, l)
	back, bl, err := DecodeRecord(rec)
	if err != nil || bl == nil {
		t.Fatalf("decode: %v %v", err, bl)
	}
	if !reflect.DeepEqual(back, a) || !reflect.DeepEqual(*bl, l) {
		t.Fatalf("round trip:\n got %+v %+v\nwant %+v %+v", back, bl, a, l)
	}
}

// Every field is in the record: changing any one changes the content hash.
func TestRecordCoversEveryField(t *testing.T) {
	base := HashAttempt(fullAttempt())
	v := reflect.ValueOf(fullAttempt()).Elem()
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		switch name {
		case "ContentHash", "EventSeq", "Compact":
			continue // not content
		}
		a := fullAttempt()
		f := reflect.ValueOf(a).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Int:
			f.SetInt(f.Int() + 1)
		case reflect.Slice:
			if f.Type() == reflect.TypeOf(json.RawMessage(nil)) {
				f.Set(reflect.ValueOf(json.RawMessage(`{"changed":true}`)))
			} else {
				f.SetBytes(append(f.Bytes(), 'x'))
			}
		case reflect.Pointer:
			a.Error.Details = json.RawMessage(`{"d":[2]}`)
		case reflect.Struct:
			f.Set(reflect.ValueOf(f.Interface().(time.Time).Add(time.Nanosecond)))
		default:
			t.Fatalf("field %s of kind %s not covered by this test", name, f.Kind())
		}
		if HashAttempt(a) == base {
			t.Errorf("changing %s does not change the content hash", name)
		}
	}
}

func TestDecodeRecordRefuses(t *testing.T) {
	good := AppendRecord(nil, fullAttempt())
	for name, rec := range map[string][]byte{
		"empty":           nil,
		"version":         append([]byte{9}, good[1:]...),
		"cut short":       good[:len(good)-1],
		"trailing bytes":  append(append([]byte(nil), good...), 0),
		"overlong":        append([]byte{RecordV2, 0x85, 0x00}, good[2:]...),
		"length past end": {RecordV2, 0xff, 0xff, 0x03},
	} {
		if _, _, err := DecodeRecord(rec); !errors.Is(err, ErrRecord) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzDecodeRecord: a record read from a store someone may have edited
// never panics the decoder, and whatever decodes has exactly one encoding.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, fullAttempt()))
	a := fullAttempt()
	f.Add(AppendLegacyRecord(nil, a, Legacy{ContentHash: "h", EventTime: a.EndedAt, EventData: []byte(`{}`)}))
	f.Add(AppendRecord(nil, &host.Attempt{}))
	f.Add(AppendRecord(nil, largeAttempt()))
	f.Fuzz(func(t *testing.T, rec []byte) {
		a, l, refs, err := DecodeRecordRefs(rec)
		h, herr := ReadHeader(rec)
		if err != nil {
			return
		}
		if herr != nil || string(h.AttemptID) != a.AttemptID {
			t.Fatalf("header disagrees with the record: %v", herr)
		}
		for _, r := range refs {
			if r.Len < ValueMin || r.Len > 1<<20 {
				return // values that large are not built here
			}
		}
		var again []byte
		switch {
		case l != nil:
			again = AppendLegacyRecord(nil, a, *l)
		case len(refs) > 0:
			// Stand-ins of the refs' lengths, encoded with the refs'
			// digests: the only encoding of those fields.
			next := 0
			for _, r := range refs {
				*valueFields(a)[r.Field] = make([]byte, r.Len)
			}
			again = appendFields([]byte{RecordV3}, a, func([]byte) [32]byte { next++; return refs[next-1].Digest })
		default:
			again = AppendRecord(nil, a)
		}
		if !bytes.Equal(again, rec) {
			t.Fatalf("re-encoding differs:\n%q\n%q", rec, again)
		}
	})
}
