package textclip

import "testing"

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"abcdef", 3, "abc…"},
		{"aé", 2, "a…"}, // é is two bytes: never cut inside it
		{"", 0, ""},
	} {
		if got := Clip(c.s, c.max); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.max, got, c.want)
		}
	}
}
