package message

import (
	"strings"

	"github.com/packrun/packrun/host"
)

// RuleSenderID is the rule of a sender id outside the sender grammar
// (CheckSenderID), in every format.
const RuleSenderID = "SENDER_ID"

// MaxSenderID bounds a sender id, as an agent_id is bounded.
const MaxSenderID = host.MaxSenderID

// CheckSenderID is host.CheckSenderID: the one grammar every format's
// sender and every registered agent_id follow.
func CheckSenderID(id string) error { return host.CheckSenderID(id) }

// Sender is the sender id of m, normalised from the form its format
// writes: the BlackRoad envelope schema's agent://<name> is <name>, the AgentOS message schema's
// agentId/instanceId is agentId, the AICO message formats' source is itself. It is the
// key of the sender's chain and of its registered agent.
func (m *Message) Sender() string {
	switch m.Source {
	case FormatEnvelope:
		return strings.TrimPrefix(m.From, "agent://")
	case FormatAgentMessage:
		a, _, _ := strings.Cut(m.From, "/")
		return a
	}
	return m.From
}

// senderForm writes s as a sender id the grammar accepts, for an encoder
// whose message came from a format that writes senders otherwise (or was
// stored before the grammar): ASCII letters lower-cased, every other
// character the grammar does not allow written as '-', separators trimmed
// from both ends; "unknown" if nothing is left.
func senderForm(s string) string {
	if CheckSenderID(s) == nil {
		return s
	}
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		case host.SenderRune(r) == "":
			return r
		}
		return '-'
	}, s)
	s = strings.TrimFunc(s, func(r rune) bool { return !host.SenderAlnum(r) })
	if len(s) > MaxSenderID {
		s = strings.TrimRightFunc(s[:MaxSenderID], func(r rune) bool { return !host.SenderAlnum(r) })
	}
	if s == "" {
		return "unknown"
	}
	return s
}
