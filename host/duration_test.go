package host

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	cases := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"200ms", 200 * time.Millisecond, true},
		{"30d", 30 * Day, true},
		{"1d12h", 36 * time.Hour, true},
		{"-2d", -2 * Day, true},
		{"0", 0, true},
		{"0d", 0, true},
		{"", 0, false},
		{"d", 0, false},
		{"1.5d", 0, false},
		{"1d-1h", 0, false},
		{"30 days", 0, false},
		{"100001d", 0, false},
		{"1dd", 0, false},
	}
	for _, c := range cases {
		got, err := ParseDuration(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"2026-01-02T15:04:05Z", time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC), true},
		{"1h", now.Add(-time.Hour), true},
		{"7d", now.Add(-7 * Day), true},
		{"-1h", time.Time{}, false},
		{"yesterday", time.Time{}, false},
	}
	for _, c := range cases {
		got, err := ParseSince(c.in, now)
		if (err == nil) != c.ok || !got.Equal(c.want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}

// A schedule's interval takes days too (schedules add --every, the API's
// every).
func TestParseEveryTakesDays(t *testing.T) {
	if got, err := ParseEvery("1d"); err != nil || got != 86400 {
		t.Fatalf("ParseEvery(1d) = %d, %v", got, err)
	}
}

// An attempt's document renames the recorded limits' keys to snake_case
// and leaves the record itself as recorded.
func TestAttemptDocumentSnakeCase(t *testing.T) {
	a := &Attempt{AttemptID: "att_1", Limits: []byte(`{"memoryBytes":65536,"timeoutMs":100,"hostMemoryBytes":1,"hostCalls":2}`)}
	d := a.Document()
	if got := string(d.Limits); got != `{"memory_bytes":65536,"timeout_ms":100,"host_memory_bytes":1,"host_calls":2}` {
		t.Fatalf("document limits %s", got)
	}
	if string(a.Limits) != `{"memoryBytes":65536,"timeoutMs":100,"hostMemoryBytes":1,"hostCalls":2}` || d.AttemptID != "att_1" {
		t.Fatalf("the record changed: %s", a.Limits)
	}
	if got := string(SnakeKeys([]byte(`[1]`))); got != `[1]` {
		t.Fatalf("not an object: %s", got)
	}
}
