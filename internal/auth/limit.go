package auth

import (
	"math"
	"time"

	"github.com/packrun/packrun/internal/ratelimit"
)

// Limiter is a token bucket per API token. One Limiter serves every
// surface a token reaches (the API and the console), so a token's rate is
// one budget wherever it is spent.
type Limiter struct {
	rate  float64
	burst float64
	b     ratelimit.Buckets
	now   func() time.Time
}

// NewLimiter returns a limiter of rate requests a second on average and
// burst at once (burst <= 0: twice rate, rounded up), or nil (no limit)
// when rate <= 0.
func NewLimiter(rate float64, burst int) *Limiter {
	if rate <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = int(math.Ceil(2 * rate))
	}
	return &Limiter{rate: rate, burst: float64(burst), now: time.Now}
}

// Rate is the requests a second a token may make on average (0: no
// limit).
func (l *Limiter) Rate() float64 {
	if l == nil {
		return 0
	}
	return l.rate
}

// Take spends one request of p's token, or refuses it with the whole
// seconds (at least 1) until one is available, for a Retry-After header.
// A nil Limiter, and an unauthenticated principal (--insecure-no-auth),
// are never limited.
func (l *Limiter) Take(p *Principal) (ok bool, retryAfter int) {
	if l == nil || p == nil || p.Insecure {
		return true, 0
	}
	ok, wait := l.b.Take(p.TokenID, l.now(), l.rate, l.burst)
	if ok {
		return true, 0
	}
	return false, max(1, int(math.Ceil(wait.Seconds())))
}
