package auth

import (
	"testing"
	"time"
)

func TestLimiter(t *testing.T) {
	if l := NewLimiter(0, 5); l != nil {
		t.Fatalf("rate 0: %+v, want no limiter", l)
	}
	var none *Limiter
	if ok, _ := none.Take(&Principal{TokenID: "a"}); !ok || none.Rate() != 0 {
		t.Fatal("a nil limiter refused")
	}
	now := time.Unix(0, 0)
	l := NewLimiter(2, 0) // burst: 4
	l.now = func() time.Time { return now }
	a, b := &Principal{TokenID: "a"}, &Principal{TokenID: "b"}
	for i := range 4 {
		if ok, _ := l.Take(a); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	if ok, retry := l.Take(a); ok || retry != 1 {
		t.Fatalf("over the burst: ok %v, retry %d s, want refused, 1 s", ok, retry)
	}
	if ok, _ := l.Take(b); !ok {
		t.Fatal("another token was refused")
	}
	if ok, _ := l.Take(&Principal{Insecure: true}); !ok {
		t.Fatal("an unauthenticated principal was limited")
	}
	now = now.Add(500 * time.Millisecond) // one request back
	if ok, _ := l.Take(a); !ok {
		t.Fatal("refused after refilling one")
	}
	if ok, _ := l.Take(a); ok {
		t.Fatal("admitted past the refill")
	}
}
