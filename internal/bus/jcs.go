package bus

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

// writeJCSString writes s as RFC 8785 §3.2.2.2 says: \" \\ \b \f \n \r \t,
// other control characters as \u00xx, everything else as itself.
func writeJCSString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	b.WriteByte('"')
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
