package work

import (
	"fmt"
	"strings"

	"github.com/flotilla-io/flotilla/internal/ellipsis"
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
	return ellipsis.Cut(fmt.Sprintf("%d of %d manifests failed: %s", len(msgs), len(a.failed), strings.Join(msgs, "; ")), maxMessage)
}
