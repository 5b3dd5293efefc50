package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/textclip"
)

// GenesisHash is the prev_hash of the first event.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// CompactJSON returns raw in the form encoding/json marshals a
// json.RawMessage to (compact, with <, >, & and U+2028/9 escaped), so that
// stored JSON survives a Marshal/Unmarshal round trip, or an indented
// re-encoding, byte for byte. Invalid JSON is returned unchanged.
func CompactJSON(raw []byte) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	if alreadyCompact(raw) {
		return raw
	}
	return compactSlow(raw)
}

// compactSlow is CompactJSON without the fast path.
func compactSlow(raw []byte) []byte {
	var c bytes.Buffer
	if err := json.Compact(&c, raw); err != nil {
		return raw
	}
	var out bytes.Buffer
	json.HTMLEscape(&out, c.Bytes())
	return out.Bytes()
}

// alreadyCompact reports that raw holds none of the bytes compaction or
// escaping could change (whitespace outside strings; <, >, & and the lead
// byte of U+2028/9 anywhere), so CompactJSON would return it as it is,
// valid or not. What json.Marshal produces usually passes, text with
// spaces included. Strings are followed as JSON defines them; where raw is
// not valid JSON the answer does not matter, since CompactJSON returns
// invalid JSON unchanged either way (FuzzCompactJSON).
//
// It runs on every attempt's input and output, so it scans with
// bytes.IndexByte (vectorised) rather than a byte at a time: a pass per
// byte that changes anywhere, then from quote to quote, checking for
// whitespace only between strings (a 20 KB output: ≈ 2 µs instead of ≈ 20).
func alreadyCompact(raw []byte) bool {
	for _, c := range [...]byte{'<', '>', '&', 0xE2} {
		if bytes.IndexByte(raw, c) >= 0 {
			return false
		}
	}
	for {
		q := bytes.IndexByte(raw, '"')
		outside := raw
		if q >= 0 {
			outside = raw[:q]
		}
		for _, c := range outside {
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				return false
			}
		}
		if q < 0 {
			return true
		}
		raw = raw[q+1:]
		// The string ends at the next quote that an even run of
		// backslashes (none included) precedes.
		for {
			e := bytes.IndexByte(raw, '"')
			if e < 0 {
				return true // unterminated: not JSON
			}
			n := 0
			for n < e && raw[e-1-n] == '\\' {
				n++
			}
			raw = raw[e+1:]
			if n%2 == 0 {
				break
			}
		}
	}
}

// canon writes fields as netstrings ("<len>:<bytes>\n") after a domain
// tag, which makes the encoding unambiguous without escaping. Fields are
// gathered in one buffer and hashed at once: a hash write per piece cost an
// allocation or two each, and an attempt has thirty fields.
type canon struct{ b []byte }

func newCanon(tag string) *canon {
	c := &canon{b: make([]byte, 0, 1024)}
	c.str(tag)
	return c
}

func (c *canon) bytes(b []byte) { c.b = appendNetstring(c.b, b) }

// appendNetstring appends "LEN:V\n". Being a plain function, it lets a
// caller build an encoding in a buffer on its stack (LinkAttempt).
func appendNetstring[T string | []byte](dst []byte, v T) []byte {
	dst = strconv.AppendInt(dst, int64(len(v)), 10)
	dst = append(dst, ':')
	dst = append(dst, v...)
	return append(dst, '\n')
}

func (c *canon) str(s string) { c.b = appendNetstring(c.b, s) }

func (c *canon) int(n int64) {
	var tmp [20]byte
	c.bytes(strconv.AppendInt(tmp[:0], n, 10))
}

func (c *canon) json(raw []byte) { c.bytes(CompactJSON(raw)) }

func (c *canon) time(t time.Time) {
	var tmp [40]byte
	c.bytes(host.AppendTime(tmp[:0], t))
}

func (c *canon) sum() string {
	h := sha256.Sum256(c.b)
	return hex.EncodeToString(h[:])
}

// HashEvent is the sha256 of the canonical encoding of an event: tag
// "packrun.event.v1", then seq, time, type, task_id, attempt_id, data
// (CompactJSON) and prev_hash, each as a netstring.
func HashEvent(e *host.Event) string {
	c := newCanon("packrun.event.v1")
	c.int(e.Seq)
	c.time(e.Time)
	c.str(e.Type)
	c.str(e.TaskID)
	c.str(e.AttemptID)
	c.json(e.Data)
	c.str(e.PrevHash)
	return c.sum()
}

// HashAttemptV1 is the content hash attempts were recorded with before the
// lean record (see RecordV1): the sha256 of the canonical encoding of
// every field except ContentHash and EventSeq, in declaration order (JSON
// fields as CompactJSON, times as host.TimeLayout).
func HashAttemptV1(a *host.Attempt) string {
	c := newCanon("packrun.attempt.v1")
	for _, s := range []string{a.AttemptID, a.TaskID, a.RunnerID, a.Pack, a.ModuleSHA256, a.Node, a.Tenant, a.RunID} {
		c.str(s)
	}
	c.int(int64(a.Attempt))
	c.str(a.ABIVersion)
	c.json(a.Input)
	c.json(a.Output)
	c.json(a.Interrupt)
	c.str(string(a.Outcome))
	if a.Error == nil {
		c.str("")
	} else {
		c.str("error")
		c.str(a.Error.Code)
		c.str(a.Error.Message)
		c.json(a.Error.Details)
	}
	c.str(string(a.ExitStatus))
	c.str(string(a.RetryClass))
	c.bytes(a.Stdout)
	c.bytes(a.Stderr)
	for _, j := range [][]byte{a.Logs, a.Events, a.Trace, a.Limits, a.AdapterCalls, a.Diagnostics} {
		c.json(j)
	}
	c.time(a.StartedAt)
	c.time(a.EndedAt)
	return c.sum()
}

// MaxBundleBytes bounds a bundle read by DecodeBundle: its artifacts are
// in it, base64-encoded.
const MaxBundleBytes = 1 << 30

// DecodeBundle decodes a bundle as `packrun evidence export` writes it
// from untrusted bytes: one JSON object with a bundle's fields only. It
// does not verify it (VerifyBundle does).
func DecodeBundle(b []byte) (*host.Bundle, error) {
	if len(b) > MaxBundleBytes {
		return nil, fmt.Errorf("bundle: %d bytes; the limit is %d", len(b), MaxBundleBytes)
	}
	var bun host.Bundle
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bun); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if name, ok := host.UnknownField(err); ok {
			msg = "unknown field " + name
		}
		return nil, fmt.Errorf("bundle: not a bundle: %s", textclip.Clip(msg, 200))
	}
	if dec.More() {
		return nil, fmt.Errorf("bundle: trailing data after the object")
	}
	return &bun, nil
}

// AttemptEvent is the attempt_recorded event of an attempt recorded at seq
// after the entry hashed prev: the store keeps no row for it (the attempt's
// record is the chain entry) and builds it when events are read. Everything
// in it derives from the attempt and its link, so a bundle's copy is
// checked by building it again.
func AttemptEvent(a *host.Attempt, seq int64, prev string) *host.Event {
	return &host.Event{Seq: seq, Time: a.EndedAt, Type: host.EventAttemptRecorded, TaskID: a.TaskID, AttemptID: a.AttemptID,
		Data: attemptEventData(a), PrevHash: prev, Hash: LinkAttempt(seq, prev, a.ContentHash)}
}

func attemptEventData(a *host.Attempt) []byte {
	// Keys in sorted order, as the attempt_recorded events stored before
	// the lean record had them.
	d, _ := json.Marshal(struct {
		Attempt     int    `json:"attempt"`
		ContentHash string `json:"content_hash"`
		ExitStatus  string `json:"exit_status"`
		Node        string `json:"node"`
		Outcome     string `json:"outcome"`
		Pack        string `json:"pack"`
		RetryClass  string `json:"retry_class"`
		Tenant      string `json:"tenant"`
	}{a.Attempt, a.ContentHash, string(a.ExitStatus), a.Node, string(a.Outcome), a.Pack, string(a.RetryClass), a.Tenant})
	return d
}

// LegacyAttemptEvent is the attempt_recorded event of a version 1 record,
// as it was stored; hash is the record's stored link (which HashEvent of
// the result must reproduce).
func LegacyAttemptEvent(a *host.Attempt, l *Legacy, seq int64, prev, hash string) *host.Event {
	return &host.Event{Seq: seq, Time: l.EventTime, Type: host.EventAttemptRecorded, TaskID: a.TaskID, AttemptID: a.AttemptID,
		Data: l.EventData, PrevHash: prev, Hash: hash}
}

// CheckAttempt reports whether a's content hash matches its content, under
// the record's hash (values out of line or not: an attempt recorded before
// they were has its large values inline) or the one before it.
func CheckAttempt(a *host.Attempt) bool {
	if HashAttempt(a) == a.ContentHash || HashAttemptV1(a) == a.ContentHash {
		return true
	}
	for _, f := range valueFields(a) {
		if len(*f) >= ValueMin {
			return hashAttemptInline(a) == a.ContentHash
		}
	}
	return false
}

// sameEvent reports whether two events are equal field for field.
func sameEvent(x, y *host.Event) bool {
	return x.Seq == y.Seq && x.Time.Equal(y.Time) && x.Type == y.Type && x.TaskID == y.TaskID && x.AttemptID == y.AttemptID &&
		bytes.Equal(CompactJSON(x.Data), CompactJSON(y.Data)) && x.PrevHash == y.PrevHash && x.Hash == y.Hash
}

// VerifyBundle checks an exported bundle on its own: the attempt's content
// hash, every event's hash, the attempt_recorded event's content hash and
// every artifact's digest and size. Events are checked one by one (a bundle
// holds a subset of the chain, so links are not checked).
func VerifyBundle(b *host.Bundle) error {
	if b.Format != host.BundleFormat {
		return fmt.Errorf("bundle: format %q, want %q", host.ShortName(b.Format), host.BundleFormat)
	}
	if b.Attempt == nil {
		return fmt.Errorf("bundle: no attempt")
	}
	a := b.Attempt
	if !CheckAttempt(a) {
		return fmt.Errorf("bundle: attempt %s: content hash %s does not match its content (%s)", host.ShortName(a.AttemptID), host.ShortName(a.ContentHash), HashAttempt(a))
	}
	chained := false
	for i, e := range b.Events {
		if e == nil {
			return fmt.Errorf("bundle: events[%d] is null", i)
		}
		own := e.Type == host.EventAttemptRecorded && e.AttemptID == a.AttemptID
		switch {
		case HashEvent(e) == e.Hash:
			if own {
				// Recorded before the lean record: the event was stored
				// and names the content hash.
				var d struct {
					ContentHash string `json:"content_hash"`
				}
				_ = json.Unmarshal(e.Data, &d) // not JSON: d stays empty and the check below fails
				if d.ContentHash != a.ContentHash {
					return fmt.Errorf("bundle: event %d records content hash %s for attempt %s, not %s", e.Seq, host.ShortName(d.ContentHash), host.ShortName(a.AttemptID), host.ShortName(a.ContentHash))
				}
			}
		case own:
			if !sameEvent(e, AttemptEvent(a, e.Seq, e.PrevHash)) {
				return fmt.Errorf("bundle: event %d (%s) does not match attempt %s: the event or the attempt was changed", e.Seq, e.Type, host.ShortName(a.AttemptID))
			}
		default:
			return fmt.Errorf("bundle: event %d (%s): hash does not match its fields", e.Seq, host.ShortName(e.Type))
		}
		chained = chained || own
	}
	if !chained {
		return fmt.Errorf("bundle: no attempt_recorded event for attempt %s", host.ShortName(a.AttemptID))
	}
	for _, art := range b.Artifacts {
		sum := sha256.Sum256(art.Content)
		if hex.EncodeToString(sum[:]) != art.SHA256 || int64(len(art.Content)) != art.Size {
			return fmt.Errorf("bundle: artifact %s (%s): content does not match its digest", host.ShortName(art.ArtifactID), host.ShortName(art.RelativePath))
		}
	}
	return nil
}
