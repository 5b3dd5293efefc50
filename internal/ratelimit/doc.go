// Package ratelimit is the token bucket per key that every rate limit of
// packrun spends from: an API token's requests (internal/auth.Limiter,
// shared by the API and the console) and a tenant's sensor events and
// messages a minute (internal/quota).
package ratelimit
