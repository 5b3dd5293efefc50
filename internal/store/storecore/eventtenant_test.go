package storecore

import (
	"encoding/json"
	"testing"
)

// EventTenant reads the tenant from the map an event's data is marshalled
// from, and agrees with DataTenant on the marshalled data whatever the
// map holds.
func TestEventTenant(t *testing.T) {
	type name string
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"tenant": "acme", "x": 1}, "acme"},
		{map[string]any{"x": 1}, ""},
		{map[string]any{"tenant": nil}, ""},
		{map[string]any{"tenant": 7}, ""},
		{map[string]any{"tenant": name("named")}, "named"},
		{map[string]any{"tenant": map[string]any{"tenant": "nested"}}, ""},
		{map[string]any{"inner": map[string]any{"tenant": "nested"}}, ""},
		{map[string]string{"tenant": "acme", "route": "POST /v1/invoke"}, "acme"},
		{map[string]string{"route": "POST /v1/invoke"}, ""},
		{json.RawMessage(`{"tenant":"raw"}`), "raw"},
		{json.RawMessage(`{"a":{"tenant":"nested"}}`), ""},
		{json.RawMessage(`["tenant"]`), ""},
		{json.RawMessage(`"tenant"`), ""},
		{struct {
			Tenant string `json:"tenant"`
		}{"field"}, "field"},
	} {
		data, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if got := EventTenant(c.v, data); got != c.want {
			t.Errorf("EventTenant(%s) = %q, want %q", data, got, c.want)
		}
		if got := DataTenant(data); got != c.want {
			t.Errorf("DataTenant(%s) = %q, want %q", data, got, c.want)
		}
	}
	// The maps the stores' own events and API calls' audit events carry
	// are read as they are: their data is not parsed again (here it is
	// not even given).
	for _, v := range []any{map[string]any{"tenant": "acme"}, map[string]string{"tenant": "acme", "token_id": "t"}} {
		if got := EventTenant(v, nil); got != "acme" {
			t.Errorf("EventTenant(%v, nil) = %q, want acme read from the map", v, got)
		}
	}
	for _, data := range []string{"", "{", "null", `{"Tenant":"x"}`} {
		if got := DataTenant([]byte(data)); got != "" {
			t.Errorf("DataTenant(%q) = %q", data, got)
		}
	}
}
