package host

import "time"

// TimeLayout is the canonical time encoding of the evidence (always UTC,
// fixed width, so that text order is time order).
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// FormatTime encodes t canonically: t.UTC().Format(TimeLayout).
func FormatTime(t time.Time) string {
	var b [len(TimeLayout)]byte
	return string(AppendTime(b[:0], t))
}

// AppendTime appends t's canonical encoding (FormatTime's) to b; the
// evidence hashes encode times with it. It is written out by hand because
// the store encodes several times per attempt inside its single writer,
// where time.Format's layout interpretation showed
// (TestFormatTimeMatchesLayout holds the two equal). Years outside 0..9999
// have no fixed-width form and go through time.AppendFormat.
func AppendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, min, sec := t.Clock()
	put := func(width, v int) {
		n := len(b)
		for range width {
			b = append(b, '0')
		}
		for j := n + width - 1; j >= n; j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(4, year)
	b = append(b, '-')
	put(2, int(month))
	b = append(b, '-')
	put(2, day)
	b = append(b, 'T')
	put(2, hour)
	b = append(b, ':')
	put(2, min)
	b = append(b, ':')
	put(2, sec)
	b = append(b, '.')
	put(9, t.Nanosecond())
	return append(b, 'Z')
}

// ParseTime decodes a canonical time.
func ParseTime(s string) (time.Time, error) { return time.Parse(TimeLayout, s) }
