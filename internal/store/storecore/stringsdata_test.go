package storecore

import (
	"bytes"
	"encoding/json"
	"testing"
)

// checkStringsData fails t unless StringsData(m) is json.Marshal(m) and
// its tenant the "tenant" key's value.
func checkStringsData(t *testing.T, m map[string]string) {
	t.Helper()
	want, _ := json.Marshal(m)
	d := StringsData(m)
	if d == nil {
		t.Fatalf("%q: nil", m)
	}
	if got := d.Bytes(); !bytes.Equal(got, want) {
		t.Fatalf("%q: %s, json.Marshal writes %s", m, got, want)
	}
	if d.Tenant() != m["tenant"] {
		t.Fatalf("%q: tenant %q, want %q", m, d.Tenant(), m["tenant"])
	}
}

// TestStringsData: an audit event's data built before the write is the
// bytes json.Marshal wrote for its map inside the write (the event is
// hashed into the chain), with the same tenant.
func TestStringsData(t *testing.T) {
	for _, m := range []map[string]string{
		{},
		{"method": "POST", "route": "POST /v1/invoke", "tenant": "default", "token_id": "5b3baf407c95", "token_name": "bench"},
		{"method": "POST", "route": "POST /v1/tasks", "tenant": "acme", "token_id": "", "auth": "none"},
		{"z": "<&>", "a": "q\"uote\\", "é": "\u2028\x00\xff", "": ""},
	} {
		checkStringsData(t, m)
	}
	if StringsData(nil) != nil {
		t.Fatal("StringsData(nil) is not nil: json.Marshal writes null for a nil map")
	}
}

// FuzzStringsData: any map of strings (keys and values escaped or not).
func FuzzStringsData(f *testing.F) {
	for _, s := range [][4]string{
		{"tenant", "default", "route", "POST /v1/invoke"},
		{"tenant", "<&>", "tenant2", "\u2028"},
		{"", "", "\xff", "é"},
		{"b", "\x00", "a", "q\"uote"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		checkStringsData(t, map[string]string{k1: v1, k2: v2, "method": "POST"})
	})
}

// BenchmarkStringsData against json.Marshal of the same map: an API
// call's audit data.
func BenchmarkStringsData(b *testing.B) {
	m := map[string]string{"method": "POST", "route": "POST /v1/invoke", "tenant": "default", "token_id": "5b3baf407c95", "token_name": "bench"}
	b.Run("StringsData", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			StringsData(m).Bytes()
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(m)
		}
	})
}
