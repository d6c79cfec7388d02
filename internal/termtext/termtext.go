// Package termtext renders text a plugin, a client or a daemon supplied
// for a terminal: the one rule every table and error line of the commands
// follows. It imports only the standard library.
package termtext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape renders text that a plugin, a client or a daemon supplied for a
// terminal. A plugin's names, descriptions and messages are its own bytes,
// and a terminal acts on the control characters among them: an escape
// sequence can clear the screen, retitle the window or forge earlier
// output, and a tab or a carriage return shifts a table's columns. Every
// character that does not print (control characters, invalid UTF-8, the
// other invisible ones) is therefore written as Go would escape it in a
// string, \x1b or \t; the rest, quotes and backslashes included, is left
// as it is, so ordinary text reads as before. Machine-readable output
// (JSON) is never passed through it: it stays exact.
func Escape(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// EscapeAll renders each of ss with Escape.
func EscapeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Escape(s)
	}
	return out
}
