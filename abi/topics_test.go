package abi

import "testing"

func TestTopics(t *testing.T) {
	for _, c := range []struct {
		pattern, topic string
		want           bool
	}{
		{"*", "crisis.detection", true},
		{"crisis.*", "crisis.detection", true},
		{"crisis.*", "crisis.a.b", true},
		{"crisis.*", "crisis", false},
		{"crisis.*", "crisisx.detection", false},
		{"query", "query", true},
		{"query", "query.x", false},
	} {
		if got := MatchTopic(c.pattern, c.topic); got != c.want {
			t.Errorf("MatchTopic(%q, %q) = %v", c.pattern, c.topic, got)
		}
	}
	for _, bad := range []string{"", ".", "a..b", "a.", "crisis.*.x", "a b", "*.x", "crisis*"} {
		if CheckTopicPattern(bad) == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
	for _, c := range []struct {
		grant, sub string
		want       bool
	}{
		{"*", "*", true}, {"crisis.*", "*", false}, {"crisis.*", "crisis.detection", true},
		{"crisis.*", "crisis.x.*", true}, {"crisis.*", "crisis.*", true}, {"crisis.detection", "crisis.*", false},
		{"a", "a", true}, {"a", "b", false},
	} {
		if got := PatternCovers(c.grant, c.sub); got != c.want {
			t.Errorf("PatternCovers(%q, %q) = %v", c.grant, c.sub, got)
		}
	}
}
