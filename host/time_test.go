package host

import (
	"testing"
	"time"
)

func TestFormatTimeMatchesLayout(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 21, 10, 33, 35, 123456789, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 3, 5, 7, 8, 9, 1000, time.FixedZone("x", -7*3600)),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
		time.Now(),
	} {
		if got, want := FormatTime(tm), tm.UTC().Format(TimeLayout); got != want {
			t.Errorf("FormatTime(%v) = %q, want %q", tm, got, want)
		}
	}
}

func FuzzFormatTime(f *testing.F) {
	f.Add(int64(0), int64(0))
	f.Add(int64(1795000000), int64(123456789))
	f.Fuzz(func(t *testing.T, sec, nsec int64) {
		tm := time.Unix(sec, nsec)
		if got, want := FormatTime(tm), tm.UTC().Format(TimeLayout); got != want {
			t.Fatalf("FormatTime(%d, %d) = %q, want %q", sec, nsec, got, want)
		}
	})
}
