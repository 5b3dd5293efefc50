package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/maphash"
	"sync"

	"github.com/packrun/packrun/host"
)

// ValueMin is the size from which a value of an attempt (one of its byte
// fields, input to diagnostics) is stored out of line, once per content,
// and named in the record by its length and SHA-256 (RecordV3). Below it
// a value costs less inline than its 32-byte digest and a second row. It
// is part of the storage format: an attempt's record, and so its hash,
// depend on it.
const ValueMin = 1024

// MaxValueBytes bounds a value a version 3 record names.
const MaxValueBytes = MaxRecordBytes

// valueNames are the names of the fields valueFields returns, in order.
var valueNames = [...]string{"input", "output", "interrupt", "stdout", "stderr", "logs", "events", "trace", "limits", "adapter_calls", "diagnostics"}

// valueFields are a's byte fields in record order: the ones a record may
// keep out of line.
func valueFields(a *host.Attempt) [11]*[]byte {
	return [...]*[]byte{(*[]byte)(&a.Input), (*[]byte)(&a.Output), (*[]byte)(&a.Interrupt), &a.Stdout, &a.Stderr,
		(*[]byte)(&a.Logs), (*[]byte)(&a.Events), (*[]byte)(&a.Trace), (*[]byte)(&a.Limits), (*[]byte)(&a.AdapterCalls), (*[]byte)(&a.Diagnostics)}
}

// Ref is a value a version 3 record keeps out of line.
type Ref struct {
	Field  int // in record order (see FillValue)
	Len    int
	Digest [32]byte // SHA-256 of the value
}

// Name is the field's JSON name.
func (r Ref) Name() string { return valueNames[r.Field] }

// Key is the digest as the stores key values: hex.
func (r Ref) Key() string { return hex.EncodeToString(r.Digest[:]) }

// value reads the next field of a version 3 record: inline bytes, or a
// reference to a value out of line.
func (r *reader) value(field int) ([]byte, *Ref) {
	what := valueNames[field]
	n := r.uvarint(what)
	if r.err != nil {
		return nil, nil
	}
	if n < ValueMin {
		if n > uint64(len(r.b)) {
			r.fail(what + " runs past the end")
			return nil, nil
		}
		v := r.b[:n:n]
		r.b = r.b[n:]
		if n == 0 {
			return nil, nil
		}
		return append([]byte(nil), v...), nil
	}
	if n > MaxValueBytes {
		r.fail(what + ": value too large")
		return nil, nil
	}
	if len(r.b) < 32 {
		r.fail(what + ": digest runs past the end")
		return nil, nil
	}
	ref := &Ref{Field: field, Len: int(n)}
	copy(ref.Digest[:], r.b[:32])
	r.b = r.b[32:]
	return nil, ref
}

// FillValue puts a value read from the store into a's field named by ref,
// after checking it against ref's length and digest: a value that does
// not match was changed after it was recorded.
func FillValue(a *host.Attempt, ref Ref, v []byte) error {
	if ref.Field < 0 || ref.Field >= len(valueNames) {
		return fmt.Errorf("%w: value field %d", ErrRecord, ref.Field)
	}
	if len(v) != ref.Len || sha256.Sum256(v) != ref.Digest {
		return fmt.Errorf("its %s (value %.12s…) no longer matches its digest", ref.Name(), ref.Key())
	}
	*valueFields(a)[ref.Field] = v
	return nil
}

// Value is a value of an attempt that its record keeps out of line, to be
// stored under Key if it is not yet.
type Value struct {
	Key  string // hex SHA-256 of Data
	Data []byte
	sum  [32]byte
}

// Values remembers, for one store in one process, the digests of the
// values it recorded lately and which of them are stored (committed):
// repeated values — the same input, the same output, the same limits —
// are then hashed and written once per content. A value is recognized by
// comparing its bytes with the one remembered (a memcmp, an order of
// magnitude cheaper than SHA-256), never by its address. The zero Values
// and a nil *Values remember nothing. Safe for concurrent use.
type Values struct {
	mu    sync.Mutex
	seed  maphash.Seed
	m     map[uint64]*valueEntry
	bytes int
}

type valueEntry struct {
	data   []byte
	sum    [32]byte
	stored bool
}

// valuesCap bounds the bytes a Values keeps; past it, it forgets all.
const valuesCap = 16 << 20

// digest returns v's SHA-256 and whether it is known to be stored.
func (vs *Values) digest(v []byte) ([32]byte, bool) {
	if vs == nil {
		return sha256.Sum256(v), false
	}
	vs.mu.Lock()
	if vs.m == nil {
		vs.seed, vs.m = maphash.MakeSeed(), map[uint64]*valueEntry{}
	}
	k := maphash.Bytes(vs.seed, v)
	if e := vs.m[k]; e != nil && bytes.Equal(e.data, v) {
		sum, stored := e.sum, e.stored
		vs.mu.Unlock()
		return sum, stored
	}
	vs.mu.Unlock()
	sum := sha256.Sum256(v)
	if len(v) > valuesCap/16 {
		return sum, false
	}
	vs.mu.Lock()
	if vs.bytes+len(v) > valuesCap {
		clear(vs.m)
		vs.bytes = 0
	}
	if _, ok := vs.m[k]; !ok {
		vs.m[k] = &valueEntry{data: bytes.Clone(v), sum: sum}
		vs.bytes += len(v)
	}
	vs.mu.Unlock()
	return sum, false
}

// AppendRecord appends a's record to b (as the package's AppendRecord) and
// returns with it the values the record keeps out of line that are not
// known to be stored: the store writes each (if absent) in the
// transaction that appends the record, and calls Stored once that
// transaction is durable. scratch, if not nil, is reused for the list.
func (vs *Values) AppendRecord(b []byte, a *host.Attempt, scratch []Value) ([]byte, []Value) {
	out := scratch[:0]
	large := false
	for _, f := range valueFields(a) {
		large = large || len(*f) >= ValueMin
	}
	if !large {
		b = append(b, RecordV2)
		return appendFields(b, a, nil), out
	}
	b = append(b, RecordV3)
	b = appendFields(b, a, func(v []byte) [32]byte {
		sum, stored := vs.digest(v)
		if !stored {
			out = append(out, Value{Key: hex.EncodeToString(sum[:]), Data: v, sum: sum})
		}
		return sum
	})
	return b, out
}

// Stored notes that vals are committed and durable: later records naming
// the same content skip writing them.
func (vs *Values) Stored(vals []Value) {
	if vs == nil || len(vals) == 0 {
		return
	}
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for _, v := range vals {
		if e := vs.m[maphash.Bytes(vs.seed, v.Data)]; e != nil && e.sum == v.sum {
			e.stored = true
		}
	}
}

// HashBytes is the key a value is stored under: its SHA-256, hex.
func HashBytes(v []byte) string {
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:])
}

// AppendRecordV2 appends a's version 2 record with every value inline, as
// packrun wrote records before values went out of line (for tests of
// stores holding such records).
func AppendRecordV2(b []byte, a *host.Attempt) []byte {
	return appendFields(append(b, RecordV2), a, nil)
}
