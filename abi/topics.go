package abi

import (
	"fmt"
	"strings"
)

// Message topics. A topic is one or more dot-separated
// segments of ASCII letters, digits, '_' and '-' ("crisis.detection",
// "llm.prompt.conditioning", the AgentOS message schema's "query"), at most MaxTopicBytes.
// A topic pattern, as a manifest's messages grant, a node's subscriptions
// and an agent's topics write them, is a topic, a topic prefix followed by
// ".*" (any topic below the prefix, at any depth: "crisis.*" matches
// "crisis.detection" but not "crisis"), or "*" (every topic).
const MaxTopicBytes = 128

// CheckTopic reports what is wrong with topic, or nil.
func CheckTopic(topic string) error {
	if topic == "" {
		return fmt.Errorf("topic is empty")
	}
	if len(topic) > MaxTopicBytes {
		return fmt.Errorf("topic is %d bytes; the limit is %d", len(topic), MaxTopicBytes)
	}
	for _, seg := range strings.Split(topic, ".") {
		if seg == "" {
			return fmt.Errorf("topic %q has an empty segment", topic)
		}
		for _, c := range []byte(seg) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return fmt.Errorf("topic %q: segments are letters, digits, '_' and '-'", topic)
			}
		}
	}
	return nil
}

// CheckTopicPattern reports what is wrong with pattern, or nil.
func CheckTopicPattern(pattern string) error {
	if pattern == "*" {
		return nil
	}
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		if err := CheckTopic(prefix); err != nil {
			return fmt.Errorf("pattern %q: %v", pattern, err)
		}
		return nil
	}
	if err := CheckTopic(pattern); err != nil {
		return fmt.Errorf("pattern %q: %v (a pattern is a topic, prefix.* or *)", pattern, err)
	}
	return nil
}

// MatchTopic reports whether topic matches pattern.
func MatchTopic(pattern, topic string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, ".*"); ok {
		return strings.HasPrefix(topic, prefix+".")
	}
	return pattern == topic
}

// MatchAnyTopic reports whether topic matches one of patterns.
func MatchAnyTopic(patterns []string, topic string) bool {
	for _, p := range patterns {
		if MatchTopic(p, topic) {
			return true
		}
	}
	return false
}

// PatternCovers reports whether every topic sub matches also matches
// grant: a subscription must stay within its pack's grant.
func PatternCovers(grant, sub string) bool {
	switch {
	case grant == "*":
		return true
	case sub == "*":
		return false
	}
	if prefix, ok := strings.CutSuffix(grant, ".*"); ok {
		return strings.HasPrefix(sub, prefix+".")
	}
	return grant == sub
}
