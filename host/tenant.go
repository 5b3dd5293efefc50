package host

import "fmt"

// MaxTenantBytes is the longest tenant name.
const MaxTenantBytes = 63

// CheckTenant validates a tenant name supplied from outside (an API body, a
// flag). The grammar is
//
//	[a-z0-9][a-z0-9._-]{0,62}, without ".."
//
// lowercase ASCII letters, digits, '.', '_' and '-', starting with a
// letter or digit, at most 63 bytes: a name that is the same however it is
// compared, printed or used as a path segment, a label or a file name, so
// "../alice", "Alice" and "alice " are never other spellings of "alice".
// The error is a validation *Error (field "tenant") that quotes the name,
// cut to 64 bytes.
func CheckTenant(op, tenant string) error {
	if tenant == "" {
		return Invalid(op, "tenant", "required")
	}
	bad := func(why string, args ...any) error {
		return Invalid(op, "tenant", "%q is not a tenant name: %s", ShortName(tenant), fmt.Sprintf(why, args...))
	}
	if len(tenant) > MaxTenantBytes {
		return bad("it is %d bytes; the limit is %d", len(tenant), MaxTenantBytes)
	}
	if c := tenant[0]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
		return bad("it must start with a lowercase letter or a digit")
	}
	for i := 0; i < len(tenant); i++ {
		c := tenant[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-':
		case c == '.':
			if i > 0 && tenant[i-1] == '.' {
				return bad(`it contains ".."`)
			}
		default:
			return bad("use only lowercase letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// DefaultTenant is the tenant of whatever names none: a task enqueued, a
// node invoked or memory used without a tenant.
const DefaultTenant = "default"
