package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

	"github.com/packrun/packrun/internal/strictjson"
	"github.com/packrun/packrun/internal/textclip"
)

// maxDepth bounds the nesting of a message document.
const maxDepth = 64

// maxPath bounds the JSON path in a RuleError, so an error stays one short line.
const maxPath = 160

// Rules shared by the codecs, for refusals the specs do not name.
const (
	RuleTooLarge = "MAX_BYTES"    // the document exceeds MaxBytes
	RuleJSON     = "INVALID_JSON" // not one strict JSON document (syntax, UTF-8, duplicate key, depth)
)

// refuse builds a *RuleError with a bounded path.
func refuse(f Format, path, rule, format string, a ...any) *RuleError {
	return &RuleError{Format: f, Path: textclip.Clip(path, maxPath), Rule: rule, Reason: fmt.Sprintf(format, a...)}
}

// parseObject checks b's size and strict JSON syntax and decodes it as a
// JSON object whose numbers stay json.Number.
func parseObject(f Format, b []byte, typeRule string) (map[string]any, error) {
	if len(b) > MaxBytes {
		return nil, refuse(f, "", RuleTooLarge, "message is %d bytes, the limit is %d", len(b), MaxBytes)
	}
	if err := strictjson.Check(b, maxDepth); err != nil {
		var ce *strictjson.CheckError
		if errors.As(err, &ce) {
			return nil, refuse(f, ce.Path, RuleJSON, "%v at byte %d", ce.Err, ce.Offset)
		}
		return nil, refuse(f, "", RuleJSON, "not valid JSON")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, refuse(f, "", RuleJSON, "not valid JSON")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, refuse(f, "", typeRule, "must be an object, not %s", strictjson.TypeName(v))
	}
	return obj, nil
}

// rawJSON renders a decoded value compactly (object keys sorted), the form
// the model keeps for payloads and extra fields.
func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen for values decoded from JSON
		return json.RawMessage("null")
	}
	return b
}

// decodeRaw decodes a model-held JSON value back into a tree.
func decodeRaw(r json.RawMessage) (any, error) {
	d := json.NewDecoder(bytes.NewReader(r))
	d.UseNumber()
	var v any
	err := d.Decode(&v)
	return v, err
}

// number reports v as a float64 if it is a JSON number within float range.
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(n), 64)
	return x, err == nil
}

// integer reports v as an int64 if it is a JSON number with no fractional
// part (draft-07's "integer": 1.0 is one) that fits an int64.
func integer(v any) (int64, bool) {
	x, ok := integral(v)
	if !ok || x < -(1<<63) || x >= 1<<63 {
		return 0, false
	}
	return int64(x), true
}

// integral reports v as a float64 if it is a JSON number with no
// fractional part, of any size.
func integral(v any) (float64, bool) {
	x, ok := number(v)
	return x, ok && x == math.Trunc(x)
}

// parseTime parses an RFC 3339 date-time with a time zone, whose UTC form
// is still a four-digit year (so the model's UTC time writes back).
func parseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UTC().Year() < 0 || t.UTC().Year() > 9999 {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// seconds converts a non-negative count of seconds to a Duration, refusing
// what a Duration cannot hold.
func seconds(x float64) (time.Duration, bool) {
	if x < 0 || x*float64(time.Second) >= math.MaxInt64 {
		return 0, false
	}
	return time.Duration(math.Round(x * float64(time.Second))), true
}

// jsonSeconds renders d as a JSON number of seconds.
func jsonSeconds(d time.Duration) json.Number {
	return json.Number(strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
}

// match reports whether s is a string matching re.
func match(v any, re *regexp.Regexp) (string, bool) {
	s, ok := v.(string)
	return s, ok && re.MatchString(s)
}

// encodeJSON renders a document tree compactly.
func encodeJSON(doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// checked renders doc and decodes it with c: an encoder's output must be
// a message its own decoder accepts.
func checked(c Codec, doc map[string]any, lost []string) ([]byte, []string, error) {
	b, err := encodeJSON(doc)
	if err != nil {
		return nil, nil, err
	}
	if _, err := c.Decode(b); err != nil {
		return nil, nil, err
	}
	return b, lost, nil
}
