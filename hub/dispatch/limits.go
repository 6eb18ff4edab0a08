package dispatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/internal/ellipsis"
	"github.com/flotilla-io/flotilla/protocol"
)

// What an agent reports about its Works is bounded twice: what is stored
// of one Work (manifests and bytes, the rest summarised in a condition),
// and how fast one session's reports are written (coalesced per Work, the
// latest wins). Every write is a new version of the Work in etcd until the
// API server compacts, so an agent that reports large statuses fast would
// otherwise fill the store.
const (
	// maxStoredManifests manifest statuses are stored per Work; the
	// health the hub aggregates is the first one's.
	maxStoredManifests = 100
	// maxStoredStatusBytes bounds the stored manifest statuses of one
	// Work, encoded.
	maxStoredStatusBytes = 64 << 10
	// maxStoredManifestStatus bounds one manifest's status fields; larger
	// ones are left out.
	maxStoredManifestStatus = 4 << 10
	// maxStoredMessage bounds one manifest's message.
	maxStoredMessage = 1 << 10
	// maxStoredStateValue bounds one state value (ManifestStatus.
	// StateValues): one byte more than a label value holds.
	maxStoredStateValue = validation.LabelValueMaxLength + 1

	// Status writes of one session: a rate, a burst (a failover brings
	// many Works at once), and the bytes they may carry.
	statusWritesPerSecond = 100
	statusWriteBurst      = 1000
	statusBytesPerSecond  = 256 << 10
	statusBytesBurst      = 4 << 20
)

// WorkConditionStatusTruncated is True on a Work whose reported manifest
// statuses were not all stored; its message says what was left out.
const WorkConditionStatusTruncated = "StatusTruncated"

// Limits counts what the bounds held back since the hub started.
type Limits struct {
	// Coalesced reports were replaced by a newer one of the same Work
	// before they were written.
	Coalesced int64
	// Truncated reports were stored in part.
	Truncated int64
	// Dropped reports were not written: the store was too full.
	Dropped int64
	// UnrequestedDeletes are WorkDeleted reports for Works the hub had
	// not asked the agent to delete: ignored, or for a Work the agent
	// held, paced as status reports and answered by sending it again.
	UnrequestedDeletes int64
}

type limitCounters struct{ coalesced, truncated, dropped, unrequestedDeletes atomic.Int64 }

// Limits returns the counts so far.
func (d *Dispatcher) Limits() Limits {
	return Limits{Coalesced: d.limits.coalesced.Load(), Truncated: d.limits.truncated.Load(), Dropped: d.limits.dropped.Load(),
		UnrequestedDeletes: d.limits.unrequestedDeletes.Load()}
}

// statusLimiter paces one cluster's status writes, and the Works its agent
// says it dropped that are sent again. It belongs to the cluster, not the
// session: a new session does not bring a new burst.
type statusLimiter struct {
	writes, bytes *rate.Limiter
}

func newStatusLimiter() statusLimiter {
	return statusLimiter{writes: rate.NewLimiter(statusWritesPerSecond, statusWriteBurst), bytes: rate.NewLimiter(statusBytesPerSecond, statusBytesBurst)}
}

// allow takes a write of size bytes if both budgets have it now; if not,
// it returns how long to wait before asking again.
func (l statusLimiter) allow(now time.Time, size int) (bool, time.Duration) {
	size = min(size, statusBytesBurst)
	w := l.writes.ReserveN(now, 1)
	b := l.bytes.ReserveN(now, size)
	delay := max(w.DelayFrom(now), b.DelayFrom(now))
	if delay == 0 {
		return true, 0
	}
	w.CancelAt(now)
	b.CancelAt(now)
	return false, delay
}

// boundedStatuses turns reported manifest results into what is stored:
// at most maxStoredManifests and maxStoredStatusBytes, messages and status
// fields cut to their bounds, state values only of the first manifest and
// for the templates the Work asks for (statePaths), and a summary of what
// was left out ("" if nothing was).
func boundedStatuses(results []protocol.ManifestResult, statePaths []string) ([]v1alpha1.ManifestStatus, string) {
	statuses := make([]v1alpha1.ManifestStatus, 0, min(len(results), maxStoredManifests))
	size, droppedStatus, cutMessages := 0, 0, 0
	for _, r := range results {
		if len(statuses) == maxStoredManifests {
			break
		}
		ms := v1alpha1.ManifestStatus{
			Identifier: v1alpha1.ResourceIdentifier{Ordinal: r.Ordinal, Group: r.Group, Version: r.Version, Kind: r.Kind,
				Resource: r.Resource, Namespace: r.Namespace, Name: r.Name},
			Health: r.Health, Message: r.Message,
		}
		if len(ms.Message) > maxStoredMessage {
			ms.Message = ms.Message[:maxStoredMessage] + "… (cut)"
			cutMessages++
		}
		switch {
		case len(r.Status) > maxStoredManifestStatus:
			droppedStatus++
		case len(r.Status) > 0:
			ms.Status = &runtime.RawExtension{Raw: r.Status}
		}
		if r.Ordinal == 0 {
			ms.StateValues = storedState(r.StateValues, statePaths)
		}
		n := encodedSize(ms)
		if size+n > maxStoredStatusBytes {
			break
		}
		size += n
		statuses = append(statuses, ms)
	}
	var notes []string
	if omitted := len(results) - len(statuses); omitted > 0 {
		notes = append(notes, fmt.Sprintf("%d more manifests omitted (at most %d manifests and %d KiB of status are stored per Work)", omitted, maxStoredManifests, maxStoredStatusBytes>>10))
	}
	if droppedStatus > 0 {
		notes = append(notes, fmt.Sprintf("status fields of %d manifests left out (over %d KiB each)", droppedStatus, maxStoredManifestStatus>>10))
	}
	if cutMessages > 0 {
		notes = append(notes, fmt.Sprintf("%d messages cut to %d bytes", cutMessages, maxStoredMessage))
	}
	return statuses, strings.Join(notes, "; ")
}

// storedState keeps the reported values of the templates asked for, each
// cut to maxStoredStateValue; nil if none. What an agent reports for other
// templates is not the hub's to store.
func storedState(reported map[string]string, statePaths []string) map[string]string {
	var out map[string]string
	for _, path := range statePaths {
		v, ok := reported[path]
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(statePaths))
		}
		// Cut with a trailing "...", which no label value ends with: a
		// cut value is refused as the whole would be.
		out[path] = ellipsis.Cut(v, maxStoredStateValue)
	}
	return out
}

// encodedSize is ms's size as stored, near enough.
func encodedSize(ms v1alpha1.ManifestStatus) int {
	b, err := json.Marshal(ms)
	if err != nil {
		return maxStoredStatusBytes // never stored
	}
	return len(b)
}

// workSize is what sending w again costs: its manifests' bytes (0 for
// no Work).
func workSize(w *v1alpha1.Work) int {
	if w == nil {
		return 0
	}
	size := 0
	for _, m := range w.Spec.Workload.Manifests {
		size += len(m.Raw)
	}
	return size
}

// reportSize is roughly what storing m's manifest results costs.
func reportSize(results []protocol.ManifestResult) int {
	size := 0
	for i, r := range results {
		if i == maxStoredManifests {
			break
		}
		size += 128 + len(r.Group) + len(r.Version) + len(r.Kind) + len(r.Resource) + len(r.Namespace) + len(r.Name) +
			min(len(r.Message), maxStoredMessage)
		if len(r.Status) <= maxStoredManifestStatus {
			size += len(r.Status)
		}
		if r.Ordinal == 0 {
			for path, v := range r.StateValues {
				size += len(path) + min(len(v), maxStoredStateValue)
			}
		}
	}
	return min(size, maxStoredStatusBytes)
}

// setTruncated keeps the StatusTruncated condition in step with summary.
func setTruncated(w *v1alpha1.Work, summary string) bool {
	if summary == "" {
		return meta.RemoveStatusCondition(&w.Status.Conditions, WorkConditionStatusTruncated)
	}
	return meta.SetStatusCondition(&w.Status.Conditions, metav1.Condition{Type: WorkConditionStatusTruncated, Status: metav1.ConditionTrue,
		Reason: "ReportTooLarge", Message: summary, ObservedGeneration: w.Status.ObservedGeneration})
}
