package host

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckTenant(t *testing.T) {
	for _, tc := range []struct {
		tenant string
		want   string // "" means valid; else a part of the message
	}{
		{"default", ""}, // the tenant of an invocation that names none
		{"acme", ""},
		{"t", ""},
		{"0", ""},
		{"acme-corp.eu_1", ""},
		{"a.b.c", ""},
		{"trailing.", ""},
		{strings.Repeat("a", 63), ""},

		{"", "required"},
		{strings.Repeat("a", 64), "64 bytes; the limit is 63"},
		{"../alice", "must start with a lowercase letter or a digit"},
		{".hidden", "must start with"},
		{"-x", "must start with"},
		{"_x", "must start with"},
		{"a..b", `contains ".."`},
		{"alice/..", "only lowercase letters"},
		{"Alice", "must start with"},
		{"aLice", "only lowercase letters"},
		{"alice ", "only lowercase letters"},
		{"a\x00b", "only lowercase letters"},
		{"a\nb", "only lowercase letters"},
		{"é", "must start with"},
		{"a\xff", "only lowercase letters"},
	} {
		err := CheckTenant("invoke", tc.tenant)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.tenant, err)
			}
			continue
		}
		var he *Error
		if !errors.As(err, &he) || !errors.Is(err, ErrValidation) || he.Field != "tenant" {
			t.Errorf("%q: %v, want a validation error of field tenant", tc.tenant, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) || strings.ContainsAny(msg, "\n\x00") {
			t.Errorf("%q: %q, want it to say %q on one line", tc.tenant, msg, tc.want)
		}
		if tc.tenant != "" && len(tc.tenant) <= 64 && !strings.Contains(msg, `"`) {
			t.Errorf("%q: %q does not quote the name", tc.tenant, msg)
		}
	}
	// A long name is quoted cut.
	if msg := CheckTenant("invoke", strings.Repeat("A", 10000)).Error(); len(msg) > 200 {
		t.Errorf("%d-byte message", len(msg))
	}
}
