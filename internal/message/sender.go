package message

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RuleSenderID is the rule of a sender id outside the sender grammar
// (CheckSenderID), in every format.
const RuleSenderID = "SENDER_ID"

// MaxSenderID bounds a sender id, as an agent_id is bounded.
const MaxSenderID = 128

// Sender is the sender id of m, normalised from the form its format
// writes: seed 000's agent://<name> is <name>, seed 001's
// agentId/instanceId is agentId, seed 002's source is itself. It is the
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

// CheckSenderID checks a sender id against the one grammar every format's
// sender and every registered agent_id follow, so that no sender can look
// like a registered agent without being it: 1 to MaxSenderID characters,
// lower-case ASCII letters, digits, '-', '_' and '.', beginning and
// ending with a letter or a digit. That leaves out upper case (Signer is
// not signer), every non-ASCII letter (a Cyrillic ѕ looks like s),
// invisible and space characters, and trailing dots and separators. The
// error says which character is at fault and why, in one line.
func CheckSenderID(id string) error {
	switch {
	case id == "":
		return errors.New("a sender id is required")
	case len(id) > MaxSenderID:
		return fmt.Errorf("is %d bytes, longer than %d", len(id), MaxSenderID)
	case !utf8.ValidString(id):
		return errors.New("is not valid UTF-8")
	}
	for i, r := range id {
		if why := senderRune(r); why != "" {
			return fmt.Errorf("has %s at byte %d (a sender id is lower-case ASCII letters, digits, '-', '_', '.')", why, i)
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	if !senderAlnum(first) {
		return fmt.Errorf("begins with %q: a sender id begins with a letter or a digit", first)
	}
	if !senderAlnum(last) {
		return fmt.Errorf("ends with %q: a sender id ends with a letter or a digit", last)
	}
	return nil
}

func senderAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

// senderRune says what is wrong with r in a sender id ("" if nothing),
// naming the Unicode class that makes it a look-alike or invisible.
func senderRune(r rune) string {
	switch {
	case senderAlnum(r) || r == '-' || r == '_' || r == '.':
		return ""
	case r >= 'A' && r <= 'Z':
		return fmt.Sprintf("the upper-case %q (write %q)", r, unicode.ToLower(r))
	case unicode.IsSpace(r) || unicode.In(r, unicode.Z):
		return fmt.Sprintf("the space %U", r)
	case unicode.In(r, unicode.Cc, unicode.Cf, unicode.Variation_Selector, unicode.Other_Default_Ignorable_Code_Point):
		return fmt.Sprintf("the invisible character %U", r)
	case unicode.In(r, unicode.Mn, unicode.Me):
		return fmt.Sprintf("the combining mark %U", r)
	case r < utf8.RuneSelf:
		return fmt.Sprintf("%q", r)
	case unicode.IsLetter(r) || unicode.IsNumber(r):
		return fmt.Sprintf("the %s letter %q (%U, a look-alike of ASCII)", scriptOf(r), r, r)
	}
	return fmt.Sprintf("%q (%U), not ASCII", r, r)
}

// scriptOf names r's Unicode script ("Cyrillic").
func scriptOf(r rune) string {
	for name, table := range unicode.Scripts {
		if name != "Common" && name != "Inherited" && unicode.Is(table, r) {
			return name
		}
	}
	return "no script"
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
		case senderRune(r) == "":
			return r
		}
		return '-'
	}, s)
	s = strings.TrimFunc(s, func(r rune) bool { return !senderAlnum(r) })
	if len(s) > MaxSenderID {
		s = strings.TrimRightFunc(s[:MaxSenderID], func(r rune) bool { return !senderAlnum(r) })
	}
	if s == "" {
		return "unknown"
	}
	return s
}
