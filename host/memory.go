package host

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// Memory is key-value memory scoped by tenant and namespace. Every
// operation is keyed by the full Scope, so one tenant can never read, list,
// delete or detect another tenant's keys: a key that exists only in another
// tenant is reported exactly like a key that exists nowhere. Which
// namespaces a pack may use is the caller's decision (the pack's grants).
type Memory interface {
	// Get returns the entry, or ErrNotFound (also for an expired entry).
	Get(ctx context.Context, scope Scope, key string) (*Entry, error)
	// Put creates or replaces an entry. It fails with ErrTooLarge when the
	// value or the namespace would exceed its limit.
	Put(ctx context.Context, scope Scope, key string, value json.RawMessage, opts PutOptions) error
	// Delete removes an entry; ErrNotFound if there was none (or it had expired).
	Delete(ctx context.Context, scope Scope, key string) error
	// List returns the keys with the given prefix (empty: all), sorted
	// bytewise, expired entries left out.
	List(ctx context.Context, scope Scope, prefix string) ([]string, error)
	// Sweep deletes every tenant's expired entries, giving their space
	// back to their namespaces, and says how many (the host's singleton
	// chores call it; an expired entry is never read either way).
	Sweep(ctx context.Context) (int64, error)
}

// Scope is where a memory entry lives.
type Scope struct {
	Tenant    string `json:"tenant"`
	Namespace string `json:"namespace"`
}

// Entry is one memory value.
type Entry struct {
	Key       string          `json:"key"`
	Value     json.RawMessage `json:"value"`
	Secret    bool            `json:"secret,omitempty"`
	ExpiresAt *time.Time      `json:"expires_at,omitempty"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// PutOptions adjust Put.
type PutOptions struct {
	// TTL, if positive, makes the entry expire that long after the Put; an
	// expired entry is never returned. Zero means no expiry.
	TTL time.Duration
	// Secret marks the value as a secret: the backend keeps it encrypted at
	// rest (internal/store/sqlite seals it with a key kept apart from the database)
	// and Get returns it as given; whoever reads it during an attempt
	// should add it to that attempt's evidence.Redactor.
	Secret bool
}

// Limits on memory names (tenant, namespace, key, prefix), in bytes.
const (
	MaxScopeNameBytes = 128
	MaxKeyBytes       = 512
)

// CheckScope validates a scope: tenant and namespace are 1..128 bytes of
// UTF-8 without control characters.
func CheckScope(op string, s Scope) error {
	if err := checkName(op, "tenant", s.Tenant, MaxScopeNameBytes, false); err != nil {
		return err
	}
	return checkName(op, "namespace", s.Namespace, MaxScopeNameBytes, false)
}

// CheckKey validates a memory key (1..512 bytes of UTF-8 without control
// characters) or, with prefix set, a List prefix (which may be empty).
func CheckKey(op, key string, prefix bool) error {
	field := "key"
	if prefix {
		field = "prefix"
	}
	return checkName(op, field, key, MaxKeyBytes, prefix)
}

// checkName validates a short identifier-like string. The messages never
// echo the value (a caller's own value would be harmless, but keeping them
// value-free makes them safe to log anywhere).
func checkName(op, field, s string, max int, emptyOK bool) error {
	if s == "" {
		if emptyOK {
			return nil
		}
		return Invalid(op, field, "required")
	}
	if len(s) > max {
		return Invalid(op, field, "is %d bytes; the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return Invalid(op, field, "is not valid UTF-8")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return Invalid(op, field, "contains a control character")
		}
	}
	return nil
}
