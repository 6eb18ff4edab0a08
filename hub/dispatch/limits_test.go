package dispatch

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
	"github.com/flotilla-io/flotilla/protocol"
)

func results(n, messageBytes, statusBytes int) []protocol.ManifestResult {
	out := make([]protocol.ManifestResult, n)
	for i := range out {
		out[i] = protocol.ManifestResult{Ordinal: i, Version: "v1", Kind: "ConfigMap", Name: fmt.Sprintf("c%d", i), Health: protocol.HealthHealthy,
			Message: strings.Repeat("m", messageBytes)}
		if statusBytes > 0 {
			out[i].Status = json.RawMessage(`{"x":"` + strings.Repeat("s", statusBytes) + `"}`)
		}
	}
	return out
}

func TestBoundedStatuses(t *testing.T) {
	tests := []struct {
		name       string
		in         []protocol.ManifestResult
		wantStored int
		wantNote   string // in the summary; "" for none
	}{
		{"small report: stored whole", results(3, 10, 10), 3, ""},
		{"too many manifests", results(250, 0, 0), maxStoredManifests, "150 more manifests omitted"},
		{"too many bytes", results(90, 1000, 3000), 15, "75 more manifests omitted"},
		{"status fields too large", results(2, 0, 5000), 2, "status fields of 2 manifests left out"},
		{"messages too long", results(1, 4000, 0), 1, "1 messages cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, note := boundedStatuses(tt.in, nil)
			if len(stored) != tt.wantStored {
				t.Errorf("stored %d manifests, want %d", len(stored), tt.wantStored)
			}
			if (tt.wantNote == "") != (note == "") || !strings.Contains(note, tt.wantNote) {
				t.Errorf("summary %q, want it to say %q", note, tt.wantNote)
			}
			size := 0
			for _, ms := range stored {
				size += encodedSize(ms)
			}
			if size > maxStoredStatusBytes {
				t.Errorf("stored %d bytes, limit %d", size, maxStoredStatusBytes)
			}
			if len(stored) > 0 && stored[0].Identifier.Ordinal != 0 {
				t.Errorf("the first manifest (whose health the hub aggregates) was not kept")
			}
		})
	}
}

// State values are stored for the Work's templates only, of the first
// manifest only, cut so that a value too long for a label stays so.
func TestBoundedStateValues(t *testing.T) {
	paths := []string{"{.jobStatus.jobId}", "{.updateRevision}"}
	tests := []struct {
		name     string
		reported map[int]map[string]string // by ordinal
		// want: a value longer than a label value is cut with "...",
		// which no label value ends with
		want map[string]string
	}{
		{"none", nil, nil},
		{"the templates asked for", map[int]map[string]string{0: {"{.jobStatus.jobId}": "a1b2", "{.updateRevision}": "web-7"}},
			map[string]string{"{.jobStatus.jobId}": "a1b2", "{.updateRevision}": "web-7"}},
		{"a template not asked for", map[int]map[string]string{0: {"{.jobStatus.jobId}": "a1b2", "{.spec}": "x"}},
			map[string]string{"{.jobStatus.jobId}": "a1b2"}},
		{"only templates not asked for", map[int]map[string]string{0: {"{.spec}": "x"}}, nil},
		{"another manifest's values", map[int]map[string]string{1: {"{.jobStatus.jobId}": "a1b2"}}, nil},
		{"a hostile long value is cut past a label's length", map[int]map[string]string{0: {"{.updateRevision}": strings.Repeat("r", 256)}},
			map[string]string{"{.updateRevision}": strings.Repeat("r", 61) + "..."}},
		{"a cut keeps characters whole, and no label value", map[int]map[string]string{0: {"{.updateRevision}": strings.Repeat("r", 60) + "é" + "rrrrr"}},
			map[string]string{"{.updateRevision}": strings.Repeat("r", 60) + "..."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := results(2, 0, 0)
			for ordinal, values := range tt.reported {
				in[ordinal].StateValues = values
			}
			stored, _ := boundedStatuses(in, paths)
			if diff := cmp.Diff(tt.want, stored[0].StateValues); diff != "" {
				t.Errorf("first manifest's state values (-want +got):\n%s", diff)
			}
			if stored[1].StateValues != nil {
				t.Errorf("second manifest's state values stored: %v", stored[1].StateValues)
			}
		})
	}
}

func TestStatusLimiterPaces(t *testing.T) {
	l := newStatusLimiter()
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	allowed := 0
	for range 2 * statusWriteBurst {
		if ok, _ := l.allow(now, 1024); ok {
			allowed++
		}
	}
	if allowed != statusWriteBurst {
		t.Errorf("%d small writes allowed at once, want the burst %d", allowed, statusWriteBurst)
	}
	l = newStatusLimiter()
	allowed = 0
	var delay time.Duration
	for range 200 {
		ok, d := l.allow(now, maxStoredStatusBytes)
		if ok {
			allowed++
		} else {
			delay = d
		}
	}
	if want := statusBytesBurst / maxStoredStatusBytes; allowed != want {
		t.Errorf("%d writes of 64 KiB allowed at once, want %d (the byte burst)", allowed, want)
	}
	if want := time.Second / 4; delay != want {
		t.Errorf("next write in %v, want %v (64 KiB at 256 KiB/s)", delay, want)
	}
}

// TestWorkReportsCoalesced sends 300 large status reports of one Work as
// fast as the stream takes them: they are written at the session's pace,
// the newest wins, the rest are counted as coalesced, and what is stored
// is bounded and says what was left out.
func TestWorkReportsCoalesced(t *testing.T) {
	f := startSession(t, []workSpec{{name: "web", generation: 1}}, nil)
	if got := describeMsg(f.agent.next()); got != "upsert web@1" {
		t.Fatalf("got %s, want upsert web@1", got)
	}
	f.agent.send(&protocol.WorkApplied{Name: "web", Generation: 1, Applied: true})
	f.await(t, "web", "observed generation 1", func(w *v1alpha1.Work) bool { return w != nil && w.Status.ObservedGeneration == 1 })
	const reports = 300
	start := time.Now()
	for i := range reports {
		r := results(200, 200, 3000)
		r[0].Message = fmt.Sprintf("report %d", i)
		f.agent.send(&protocol.WorkStatus{Name: "web", Generation: 1, Manifests: r})
	}
	f.await(t, "web", "the last report", func(w *v1alpha1.Work) bool {
		return w != nil && len(w.Status.ManifestStatuses) > 0 && w.Status.ManifestStatuses[0].Message == fmt.Sprintf("report %d", reports-1)
	})
	elapsed := time.Since(start)
	w := f.stored(t, "web")
	if cond := meta.FindStatusCondition(w.Status.Conditions, WorkConditionStatusTruncated); cond == nil || !strings.Contains(cond.Message, "more manifests omitted") {
		t.Errorf("StatusTruncated = %+v, want it to say manifests were omitted", cond)
	}
	// Each report costs the 64 KiB a Work may store: the byte budget
	// allows its burst, then 4 a second, however fast they come.
	limits := f.d.Limits()
	written := reports - limits.Coalesced
	perReport := int64(maxStoredStatusBytes)
	most := statusBytesBurst/perReport + int64(elapsed.Seconds()*statusBytesPerSecond/float64(perReport)) + 1
	if written > most {
		t.Errorf("%d of %d reports written in %v, want at most %d (the rest coalesced)", written, reports, elapsed, most)
	}
	t.Logf("limits: %+v", limits)
}
