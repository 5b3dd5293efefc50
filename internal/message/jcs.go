package message

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonical is the form a message's signature and hash cover: the JSON
// Canonicalization Scheme (RFC 8785) of the wire document with its
// top-level "signature" member left out. Object members are sorted by the
// UTF-16 code units of their names, numbers are written as ECMAScript
// writes doubles, strings escape only what JSON requires, and there is
// no white space. doc must be one JSON object (the codecs have already
// checked it strictly: no duplicate names, valid UTF-8).
func Canonical(doc []byte) ([]byte, error) {
	p := jcsParser{b: doc}
	p.ws()
	if p.i >= len(doc) || doc[p.i] != '{' {
		return nil, fmt.Errorf("canonical form: not a JSON object")
	}
	out := make([]byte, 0, len(doc))
	out, err := p.object(out, 0, true)
	if err == nil {
		if p.ws(); p.i != len(doc) {
			err = fmt.Errorf("data after the document")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("canonical form: %v", err)
	}
	return out, nil
}

// jcsParser writes the canonical form of a JSON document as it reads it,
// without building a tree: members of an object are written to a scratch
// buffer, then copied out in key order.
type jcsParser struct {
	b []byte
	i int
}

const jcsMaxDepth = 64

var errJCSSyntax = fmt.Errorf("not valid JSON")

func (p *jcsParser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

func (p *jcsParser) value(out []byte, depth int) ([]byte, error) {
	p.ws()
	if p.i >= len(p.b) {
		return nil, errJCSSyntax
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(out, depth+1, false)
	case c == '[':
		return p.array(out, depth+1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return appendJCSString(out, s), nil
	case c == 't':
		return p.literal(out, "true")
	case c == 'f':
		return p.literal(out, "false")
	case c == 'n':
		return p.literal(out, "null")
	default:
		return p.number(out)
	}
}

func (p *jcsParser) literal(out []byte, lit string) ([]byte, error) {
	if !bytes.HasPrefix(p.b[p.i:], []byte(lit)) {
		return nil, errJCSSyntax
	}
	p.i += len(lit)
	return append(out, lit...), nil
}

// number reads a JSON number and writes it as ECMAScript writes the
// double it denotes.
func (p *jcsParser) number(out []byte) ([]byte, error) {
	start := p.i
	for p.i < len(p.b) && strings.IndexByte("+-0123456789.eE", p.b[p.i]) >= 0 {
		p.i++
	}
	tok := p.b[start:p.i]
	if !json.Valid(tok) {
		return nil, errJCSSyntax
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("number %.40s is not an IEEE 754 double", tok)
	}
	return append(out, es6Number(f)...), nil
}

// str reads a JSON string (p.b[p.i] is its quote) and returns its value.
func (p *jcsParser) str() (string, error) {
	start, escaped := p.i, false
	p.i++
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '\\':
			escaped = true
			p.i += 2
			continue
		case '"':
			p.i++
			tok := p.b[start:p.i]
			if !escaped && utf8.Valid(tok) {
				return string(tok[1 : len(tok)-1]), nil
			}
			var s string
			if err := json.Unmarshal(tok, &s); err != nil {
				return "", errJCSSyntax
			}
			return s, nil
		}
		p.i++
	}
	return "", errJCSSyntax
}

func (p *jcsParser) array(out []byte, depth int) ([]byte, error) {
	if depth > jcsMaxDepth {
		return nil, fmt.Errorf("nested too deeply")
	}
	p.i++ // [
	out = append(out, '[')
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return append(out, ']'), nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			out = append(out, ',')
		}
		var err error
		if out, err = p.value(out, depth); err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, errJCSSyntax
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return append(out, ']'), nil
		default:
			return nil, errJCSSyntax
		}
	}
}

// jcsMember is one member of an object being canonicalised: its name and
// where its canonical value sits in the scratch buffer.
type jcsMember struct {
	key        string
	start, end int
}

// object writes an object's members sorted by name; top leaves out the
// document's own "signature" member.
func (p *jcsParser) object(out []byte, depth int, top bool) ([]byte, error) {
	if depth > jcsMaxDepth {
		return nil, fmt.Errorf("nested too deeply")
	}
	p.i++ // {
	var scratch []byte
	var members []jcsMember
	for read := 0; ; read++ {
		p.ws()
		if p.i >= len(p.b) {
			return nil, errJCSSyntax
		}
		if p.b[p.i] == '}' && read == 0 {
			p.i++
			break
		}
		if p.b[p.i] != '"' {
			return nil, errJCSSyntax
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		if p.ws(); p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, errJCSSyntax
		}
		p.i++
		m := jcsMember{key: key, start: len(scratch)}
		if scratch, err = p.value(scratch, depth); err != nil {
			return nil, err
		}
		m.end = len(scratch)
		if !(top && key == "signature") {
			members = append(members, m)
		}
		p.ws()
		if p.i >= len(p.b) {
			return nil, errJCSSyntax
		}
		if p.b[p.i] == '}' {
			p.i++
			break
		}
		if p.b[p.i] != ',' {
			return nil, errJCSSyntax
		}
		p.i++
	}
	slices.SortFunc(members, func(a, b jcsMember) int { return compareUTF16(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJCSString(out, m.key)
		out = append(out, ':')
		out = append(out, scratch[m.start:m.end]...)
	}
	return append(out, '}'), nil
}

// canonicalTree is Canonical by way of a decoded tree: the reference the
// streaming form is checked against (FuzzCanonical).
func canonicalTree(doc []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical form: %v", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("canonical form: not a JSON object")
	}
	delete(obj, "signature")
	var b bytes.Buffer
	if err := writeJCS(&b, obj); err != nil {
		return nil, fmt.Errorf("canonical form: %v", err)
	}
	return b.Bytes(), nil
}

func writeJCS(b *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case string:
		writeJCSString(b, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("number %.40s is not an IEEE 754 double", string(x))
		}
		b.WriteString(es6Number(f))
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJCS(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJCSString(b, k)
			b.WriteByte(':')
			if err := writeJCS(b, x[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("unexpected %T", v)
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785 §3.2.3):
// byte order (which is code point order) except where a character beyond
// U+FFFF (a surrogate pair, D800–DBFF first) meets one in E000–FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			return cmp.Compare(utf16Key(ra), utf16Key(rb))
		}
		a, b = a[na:], b[nb:]
	}
	return cmp.Compare(len(a), len(b))
}

// utf16Key is a rune's first UTF-16 code unit, scaled so that two runes
// with the same first unit (two supplementary characters) still order by
// their code points.
func utf16Key(r rune) int64 {
	if r < 0x10000 {
		return int64(r) << 21
	}
	hi, _ := utf16.EncodeRune(r)
	return int64(hi)<<21 | int64(r)
}

// writeJCSString writes s as appendJCSString does.
func writeJCSString(b *bytes.Buffer, s string) { b.Write(appendJCSString(nil, s)) }

// appendJCSString appends s as RFC 8785 §3.2.2.2 says: \" \\ \b \f \n \r \t,
// other control characters as \u00xx, everything else as itself.
func appendJCSString(out []byte, s string) []byte {
	out = append(out, '"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			out = append(out, `\"`...)
		case r == '\\':
			out = append(out, `\\`...)
		case r == '\b':
			out = append(out, `\b`...)
		case r == '\f':
			out = append(out, `\f`...)
		case r == '\n':
			out = append(out, `\n`...)
		case r == '\r':
			out = append(out, `\r`...)
		case r == '\t':
			out = append(out, `\t`...)
		case r < 0x20:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, s[i:i+n]...)
		}
		i += n
	}
	return append(out, '"')
}

// es6Number writes f as ECMAScript's Number.prototype.toString does
// (RFC 8785 §3.2.2.3): the shortest digits that read back as f, in plain
// notation for exponents -7 < e < 21 and in exponent notation otherwise.
func es6Number(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	neg := f < 0
	// Shortest round-trip digits and exponent: d.ddddde±x.
	s := strconv.FormatFloat(math.Abs(f), 'e', -1, 64)
	mant, expStr, _ := strings.Cut(s, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	n := exp + 1 // position of the decimal point after the first digit
	k := len(digits)
	var out string
	switch {
	case k <= n && n <= 21:
		out = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		e := n - 1
		sign := "+"
		if e < 0 {
			sign, e = "-", -e
		}
		m := digits[:1]
		if k > 1 {
			m += "." + digits[1:]
		}
		out = m + "e" + sign + strconv.Itoa(e)
	}
	if neg {
		return "-" + out
	}
	return out
}
