package evidence

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// The record is the stored form of an attempt: one compact binary encoding
// of every field, written once by the caller and appended as it is, so the
// single writer neither binds thirty columns nor builds an event. Its
// SHA-256 is the attempt's content hash (HashAttempt), so `evidence verify`
// checks a stored attempt without decoding it.
//
// Layout: a version byte, then the fields in a fixed order, each a
// length-prefixed byte string (uvarint length), a varint or a time
// (varint seconds, uvarint nanoseconds). The fields the store indexes come
// first (AttemptHeader), so they can be read without decoding the rest.
//
//	2  attempt_id task_id tenant pack attempt started_at
//	   ended_at runner_id module_sha256 node run_id abi_version
//	   outcome exit_status retry_class error? [code message details]
//	   input output interrupt stdout stderr
//	   logs events trace limits adapter_calls diagnostics
//
// Version 1 is an attempt recorded before the lean record (by packrun
// 0.x's task_attempts table), carried over as it was chained: the same
// fields, then the content hash it was recorded with and the time and data
// of its attempt_recorded event, whose hash (HashEvent) is its place in
// the chain.
//
// Version 3 is version 2 with its large values out of line (values.go):
// any of the byte fields from input to diagnostics that is ValueMin bytes
// or longer is written as its length and the SHA-256 of its bytes, which
// are stored once per content beside the records. An attempt with no such
// field is written as version 2, so the record of an attempt, and its
// hash, are still a function of the attempt alone.
const (
	RecordV1 byte = 1
	RecordV2 byte = 2
	RecordV3 byte = 3
)

// MaxRecordBytes bounds a record the decoder accepts: an attempt's fields
// are each bounded well below it (payloads, output and captured streams).
const MaxRecordBytes = 64 << 20

// Legacy is what a version 1 record carries besides the attempt.
type Legacy struct {
	ContentHash string    // HashAttemptV1 of the attempt, as recorded
	EventTime   time.Time // of its attempt_recorded event
	EventData   []byte    // of its attempt_recorded event
}

// AppendRecord appends a's record to b (version 3 if a value goes out of
// line, else version 2). a must be normalized (as the store records it):
// JSON compact, empty fields nil, times UTC. The values it names are not
// returned: a store uses Values.AppendRecord.
func AppendRecord(b []byte, a *host.Attempt) []byte {
	b, _ = (*Values)(nil).AppendRecord(b, a, nil)
	return b
}

// AppendLegacyRecord appends a version 1 record: a as it was stored before
// the lean record, with its chain event's time and data.
func AppendLegacyRecord(b []byte, a *host.Attempt, l Legacy) []byte {
	b = append(b, RecordV1)
	b = appendFields(b, a, nil)
	b = appendStr(b, l.ContentHash)
	b = appendTime(b, l.EventTime)
	return appendBytes(b, l.EventData)
}

// RecordSize is the length of a's version 2 record, for sizing buffers.
func RecordSize(a *host.Attempt) int {
	n := 96 + len(a.AttemptID) + len(a.TaskID) + len(a.Tenant) + len(a.Pack) + len(a.RunnerID) + len(a.ModuleSHA256) +
		len(a.Node) + len(a.RunID) + len(a.ABIVersion) + len(a.Outcome) + len(a.ExitStatus) + len(a.RetryClass) +
		len(a.Input) + len(a.Output) + len(a.Interrupt) + len(a.Stdout) + len(a.Stderr) + len(a.Logs) + len(a.Events) +
		len(a.Trace) + len(a.Limits) + len(a.AdapterCalls) + len(a.Diagnostics)
	if a.Error != nil {
		n += len(a.Error.Code) + len(a.Error.Message) + len(a.Error.Details)
	}
	return n
}

// appendFields appends a's fields; out, if not nil, is called for each
// value that goes out of line and returns its digest (version 3).
func appendFields(b []byte, a *host.Attempt, out func([]byte) [32]byte) []byte {
	b = appendStr(b, a.AttemptID)
	b = appendStr(b, a.TaskID)
	b = appendStr(b, a.Tenant)
	b = appendStr(b, a.Pack)
	b = binary.AppendVarint(b, int64(a.Attempt))
	b = appendTime(b, a.StartedAt)
	b = appendTime(b, a.EndedAt)
	for _, s := range [...]string{a.RunnerID, a.ModuleSHA256, a.Node, a.RunID, a.ABIVersion, string(a.Outcome), string(a.ExitStatus), string(a.RetryClass)} {
		b = appendStr(b, s)
	}
	if a.Error == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = appendStr(b, a.Error.Code)
		b = appendStr(b, a.Error.Message)
		b = appendBytes(b, a.Error.Details)
	}
	for _, f := range valueFields(a) {
		if out != nil && len(*f) >= ValueMin {
			b = binary.AppendUvarint(b, uint64(len(*f)))
			sum := out(*f)
			b = append(b, sum[:]...)
			continue
		}
		b = appendBytes(b, *f)
	}
	return b
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// HashRecord is the content hash of a version 2 or 3 record: its SHA-256,
// hex.
func HashRecord(rec []byte) string {
	sum := sha256.Sum256(rec)
	return hex.EncodeToString(sum[:])
}

// HashAttempt is the content hash of an attempt: the SHA-256 of its
// record (version 2, or 3 with its large values as their digests), its JSON fields taken in their stored form
// (CompactJSON), so that the hash survives an indented re-encoding of a
// bundle.
func HashAttempt(a *host.Attempt) string {
	c := storedForm(a)
	return HashRecord(AppendRecord(make([]byte, 0, RecordSize(&c)), &c))
}

// hashAttemptInline is HashAttempt under version 2 whatever the size of
// the values: the hash of an attempt recorded before values went out of
// line.
func hashAttemptInline(a *host.Attempt) string {
	c := storedForm(a)
	return HashRecord(AppendRecordV2(make([]byte, 0, RecordSize(&c)), &c))
}

// storedForm is a copy of a with its JSON fields compacted.
func storedForm(a *host.Attempt) host.Attempt {
	c := *a
	for _, f := range c.JSONFields() {
		*f.Value = CompactJSON(*f.Value)
	}
	if c.Error != nil {
		e := *c.Error
		e.Details = CompactJSON(e.Details)
		c.Error = &e
	}
	return c
}

// LinkAttempt is an attempt's place in the hash chain: the hash of the
// entry at seq, given the hash of the entry before it and the attempt's
// content hash. The writer computes only this (a few hundred nanoseconds);
// everything else about the attempt was hashed before it got there.
func LinkAttempt(seq int64, prev, contentHash string) string {
	var buf [256]byte // a link's encoding fits: built on the stack
	var n [20]byte
	b := appendNetstring(buf[:0], "packrun.attempt-link.v2")
	b = appendNetstring(b, strconv.AppendInt(n[:0], seq, 10))
	b = appendNetstring(b, prev)
	b = appendNetstring(b, contentHash)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ErrRecord is returned for a record that does not decode.
var ErrRecord = errors.New("malformed attempt record")

type reader struct {
	b       []byte
	err     error
	scratch [binary.MaxVarintLen64]byte
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrRecord, what)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || n != len(binary.AppendUvarint(r.scratch[:0], v)) {
		// Overlong encodings are refused: a record has one encoding.
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 || n != len(binary.AppendVarint(r.scratch[:0], v)) {
		r.fail(what)
		return 0
	}
	r.b = r.b[n:]
	return v
}

// raw returns the next length-prefixed field without copying it.
func (r *reader) raw(what string) []byte {
	n := r.uvarint(what)
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail(what + " runs past the end")
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) str(what string) string { return string(r.raw(what)) }

// bytes returns a copy of the next field, nil when empty.
func (r *reader) bytes(what string) []byte {
	v := r.raw(what)
	if len(v) == 0 {
		return nil
	}
	return append([]byte(nil), v...)
}

func (r *reader) time(what string) time.Time {
	sec := r.varint(what)
	nsec := r.uvarint(what)
	if r.err == nil && nsec >= 1e9 {
		r.fail(what + ": nanoseconds out of range")
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// AttemptHeader is the indexed part of a record, read without decoding the
// rest (the store checks its columns against it).
type AttemptHeader struct {
	Version                         byte
	AttemptID, TaskID, Tenant, Pack []byte // views into the record
	Attempt                         int64
	StartedAt                       time.Time
}

// ReadHeader reads a record's header without copying.
func ReadHeader(rec []byte) (AttemptHeader, error) {
	var h AttemptHeader
	if len(rec) == 0 || rec[0] < RecordV1 || rec[0] > RecordV3 {
		return h, fmt.Errorf("%w: unknown version", ErrRecord)
	}
	if len(rec) > MaxRecordBytes {
		return h, fmt.Errorf("%w: %d bytes, the limit is %d", ErrRecord, len(rec), MaxRecordBytes)
	}
	h.Version = rec[0]
	r := &reader{b: rec[1:]}
	h.AttemptID = r.raw("attempt_id")
	h.TaskID = r.raw("task_id")
	h.Tenant = r.raw("tenant")
	h.Pack = r.raw("pack")
	h.Attempt = r.varint("attempt")
	h.StartedAt = r.time("started_at")
	return h, r.err
}

// DecodeRecord decodes a record of any version; l is set for version 1.
// The fields a version 3 record keeps out of line are left nil: a reader
// that shows or replays the attempt uses DecodeRecordRefs and fills them.
func DecodeRecord(rec []byte) (a *host.Attempt, l *Legacy, err error) {
	a, l, _, err = DecodeRecordRefs(rec)
	return a, l, err
}

// DecodeRecordRefs decodes a record of any version and lists the values
// it keeps out of line (FillValue puts each in place). A record is read
// from the store, which someone may have edited: every length is checked,
// nothing is trusted.
func DecodeRecordRefs(rec []byte) (a *host.Attempt, l *Legacy, refs []Ref, err error) {
	if len(rec) == 0 || rec[0] < RecordV1 || rec[0] > RecordV3 {
		return nil, nil, nil, fmt.Errorf("%w: unknown version", ErrRecord)
	}
	if len(rec) > MaxRecordBytes {
		return nil, nil, nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrRecord, len(rec), MaxRecordBytes)
	}
	r := &reader{b: rec[1:]}
	a = &host.Attempt{}
	a.AttemptID = r.str("attempt_id")
	a.TaskID = r.str("task_id")
	a.Tenant = r.str("tenant")
	a.Pack = r.str("pack")
	n := r.varint("attempt")
	if n < 0 || n > 1<<31-1 {
		r.fail("attempt out of range")
	}
	a.Attempt = int(n)
	a.StartedAt = r.time("started_at")
	a.EndedAt = r.time("ended_at")
	a.RunnerID = r.str("runner_id")
	a.ModuleSHA256 = r.str("module_sha256")
	a.Node = r.str("node")
	a.RunID = r.str("run_id")
	a.ABIVersion = r.str("abi_version")
	a.Outcome = abi.Outcome(r.str("outcome"))
	a.ExitStatus = host.ExitStatus(r.str("exit_status"))
	a.RetryClass = host.RetryClass(r.str("retry_class"))
	if r.err == nil {
		if len(r.b) == 0 {
			r.fail("error flag missing")
		} else {
			flag := r.b[0]
			r.b = r.b[1:]
			switch flag {
			case 0:
			case 1:
				a.Error = &abi.Error{Code: r.str("error.code"), Message: r.str("error.message"), Details: r.bytes("error.details")}
			default:
				r.fail("error flag " + strconv.Itoa(int(flag)))
			}
		}
	}
	for i, f := range valueFields(a) {
		if rec[0] != RecordV3 {
			*f = r.bytes(valueNames[i])
			continue
		}
		var ref *Ref
		*f, ref = r.value(i)
		if ref != nil {
			refs = append(refs, *ref)
		}
	}
	if rec[0] == RecordV3 && r.err == nil && len(refs) == 0 {
		r.fail("version 3 with no value out of line") // one encoding per attempt
	}
	if rec[0] == RecordV1 {
		l = &Legacy{ContentHash: r.str("content_hash"), EventTime: r.time("event time"), EventData: r.bytes("event data")}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, nil, nil, r.err
	}
	if l != nil {
		a.ContentHash = l.ContentHash
	} else {
		a.ContentHash = HashRecord(rec)
	}
	return a, l, refs, nil
}
