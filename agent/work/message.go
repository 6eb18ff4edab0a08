package work

import (
	"fmt"
	"strings"

	"github.com/flotilla-io/flotilla/internal/ellipsis"
)

// maxMessage is the protocol's limit on a human-readable message.
const maxMessage = 4 << 10

// failureSummary says which manifests failed and why, or "" if none did.
// Refusals by the member policy come first: they last until the member's
// owner changes the policy.
func (a *applyRun) failureSummary() string {
	var refused, failed []string
	for i := range a.failed {
		switch {
		case a.refused[i]:
			refused = append(refused, a.results[i].Message)
		case a.failed[i]:
			failed = append(failed, a.results[i].Message)
		}
	}
	msgs := append(refused, failed...)
	if len(msgs) == 0 {
		return ""
	}
	return ellipsis.Cut(fmt.Sprintf("%d of %d manifests failed: %s", len(msgs), len(a.failed), strings.Join(msgs, "; ")), maxMessage)
}
