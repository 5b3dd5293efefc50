// Package textclip bounds text echoed into error messages: a refusal quotes
// what it refuses, and untrusted input (a field name, a manifest value, an
// import name) must not make the message as long as the input.
package textclip

import "unicode/utf8"

// Clip cuts s to at most max bytes on a character boundary, marking a cut
// with "…".
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
