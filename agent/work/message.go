package work

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxMessage is the protocol's limit on a human-readable message.
const maxMessage = 4 << 10

// failureSummary says which manifests failed and why, or "" if none did.
func (a *applyRun) failureSummary() string {
	var msgs []string
	for i, failed := range a.failed {
		if failed {
			msgs = append(msgs, a.results[i].Message)
		}
	}
	if len(msgs) == 0 {
		return ""
	}
	return truncate(fmt.Sprintf("%d of %d manifests failed: %s", len(msgs), len(a.failed), strings.Join(msgs, "; ")), maxMessage)
}

// truncate cuts s to at most limit bytes on a rune boundary, marking the cut.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	const ellipsis = "..."
	cut := limit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
