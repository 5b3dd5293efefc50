package host

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Day is the unit "d" of ParseDuration: 24 hours (calendar days and
// daylight saving are not considered).
const Day = 24 * time.Hour

// maxDays bounds the days of a duration so that it fits a time.Duration.
const maxDays = 100_000

// ParseDuration reads a duration as every CLI flag and API parameter of
// packrun takes it: a Go duration (90s, 1h30m, 200ms), optionally led by a
// whole number of days (30d, 1d12h). It is the one duration parser of the
// CLI and the API; callers check the sign and range they accept.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimLeft(t, "+-")
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	var d time.Duration
	days := i > 0 && i < len(t) && t[i] == 'd'
	if days && i < len(t) && t[i] == 'd' {
		n, err := strconv.Atoi(t[:i])
		if err != nil || n > maxDays {
			return 0, fmt.Errorf("%q: at most %d days", s, maxDays)
		}
		d, t = time.Duration(n)*Day, t[i+1:]
	}
	if t != "" || !days {
		rest, err := time.ParseDuration(t)
		if err != nil || rest < 0 {
			return 0, fmt.Errorf("%q is not a duration such as 90s, 1h30m or 30d", s)
		}
		d += rest
	}
	if neg {
		d = -d
	}
	return d, nil
}

// ParseSince reads a "since" bound: an RFC 3339 time, or a duration
// (ParseDuration) back from now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a duration back from now (1h, 7d)", s)
	}
	return now.Add(-d), nil
}
