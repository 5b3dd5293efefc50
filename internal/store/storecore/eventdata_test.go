package storecore

import (
	"bytes"
	"encoding/json"
	"sort"
	"testing"
)

// An event's data built with EventData is the bytes json.Marshal gives
// for the same map: strings escaped the same way, alone and in an object.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"uote", "<&>", "é", "\u2028", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
		// And inside an object, against a map.
		keys := []string{"b" + s, "a", s}
		sort.Strings(keys)
		m := map[string]any{}
		d := &EventData{}
		last := "\x00none"
		for _, k := range keys {
			if k == last {
				continue
			}
			last = k
			m[k] = s
			d.Str(k, s)
		}
		want, _ = json.Marshal(m)
		if got := d.Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("object %s, want %s", got, want)
		}
	})
}
