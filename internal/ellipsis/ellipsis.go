// Package ellipsis cuts messages to a size limit without breaking a
// character, marking the cut: the agent bounds what it tells the hub
// (session ends, health and Work messages) this way.
package ellipsis

import "unicode/utf8"

// Cut cuts s to at most limit bytes on a character boundary, ending the
// cut text with "...".
func Cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const mark = "..."
	cut := limit - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
