package storecore

import "testing"

// RebindQuestion turns every $N placeholder into SQLite's ?N, keeping the
// number, and leaves text without one as it is.
func TestRebindQuestion(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`WHERE a = $1 AND (b = $2 OR c = $2) LIMIT $10`, `WHERE a = ?1 AND (b = ?2 OR c = ?2) LIMIT ?10`},
		{`SELECT '$' || x FROM t WHERE y = $3`, `SELECT '$' || x FROM t WHERE y = ?3`},
	} {
		for range 2 { // the second answer comes from the kept form
			if got := RebindQuestion(tt.in); got != tt.want {
				t.Errorf("RebindQuestion(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}
