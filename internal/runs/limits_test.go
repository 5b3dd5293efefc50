package runs

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestCheckConfigurable: recursionLimit from 1 to MaxRecursionLimit is
// served and stored compact; anything else is refused naming its field.
func TestCheckConfigurable(t *testing.T) {
	for _, c := range []struct {
		in, want, field string
	}{
		{"", "", ""},
		{"null", "", ""},
		{"{}", "", ""},
		{`{ "recursionLimit" : 5 }`, `{"recursionLimit":5}`, ""},
		{`{"recursionLimit":10000}`, `{"recursionLimit":10000}`, ""},
		{`{"recursionLimit":10001}`, "", "configurable.recursionLimit"},
		{`{"recursionLimit":0}`, "", "configurable.recursionLimit"},
		{`{"recursionLimit":2.5}`, "", "configurable.recursionLimit"},
		{`{"recursionLimit":"3"}`, "", "configurable.recursionLimit"},
		{`{"recursionLimit":3,"model":"x"}`, "", "configurable.model"},
		{`[]`, "", "configurable"},
		{`3`, "", "configurable"},
	} {
		got, err := checkConfigurable("start run", json.RawMessage(c.in))
		var he *host.Error
		switch {
		case c.field == "" && (err != nil || string(got) != c.want):
			t.Errorf("%s: %s %v, want %s", c.in, got, err, c.want)
		case c.field != "" && (!errors.As(err, &he) || he.Field != c.field):
			t.Errorf("%s: %v, want a refusal naming %s", c.in, err, c.field)
		}
	}
}

// TestExecutions: every node.started counts, a node's re-runs included.
func TestExecutions(t *testing.T) {
	p := progressOf([]host.RunEvent{
		runEvent(host.RunEventNodeStarted, "a", nil), runEvent(host.RunEventNodeStarted, "a", nil), runEvent(host.RunEventNodeStarted, "b", nil),
	})
	if n := p.executions(); n != 3 {
		t.Fatalf("%d executions, want 3", n)
	}
	r := &host.Run{Configurable: json.RawMessage(`{"recursionLimit":7}`)}
	if n := recursionLimit(r); n != 7 {
		t.Fatalf("limit %d", n)
	}
	if n := recursionLimit(&host.Run{}); n != 0 {
		t.Fatalf("no limit: %d", n)
	}
}
