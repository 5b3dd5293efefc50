package host

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// The sender grammar lives here, beside agent registration, so that the
// agents' records (DecodeAgentRecord) and every message format
// (internal/message) check one rule.

// MaxSenderID bounds a sender id, as an agent_id is bounded.
const MaxSenderID = 128

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
		if why := SenderRune(r); why != "" {
			return fmt.Errorf("has %s at byte %d (a sender id is lower-case ASCII letters, digits, '-', '_', '.')", why, i)
		}
	}
	first, _ := utf8.DecodeRuneInString(id)
	last, _ := utf8.DecodeLastRuneInString(id)
	if !SenderAlnum(first) {
		return fmt.Errorf("begins with %q: a sender id begins with a letter or a digit", first)
	}
	if !SenderAlnum(last) {
		return fmt.Errorf("ends with %q: a sender id ends with a letter or a digit", last)
	}
	return nil
}

// SenderAlnum reports whether r may begin or end a sender id.
func SenderAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

// SenderRune says what is wrong with r in a sender id ("" if nothing),
// naming the Unicode class that makes it a look-alike or invisible.
func SenderRune(r rune) string {
	switch {
	case SenderAlnum(r) || r == '-' || r == '_' || r == '.':
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
