package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestApplyFallbackFillsOnlyMissingTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &failoverReport{endReasons: map[string]int{}, bindings: map[string]*bindingTimes{
		// Both events seen: the polls must not change it.
		"a": {evicted: t0.Add(100 * time.Millisecond), ended: t0.Add(5 * time.Second)},
	}}
	polled := map[string]*bindingTimes{
		"a": {fallbackTaskCreated: t0, fallbackTaskGoneSeen: t0.Add(9 * time.Second)},
		"b": {fallbackTaskCreated: t0.Add(time.Second), fallbackTaskGoneSeen: t0.Add(10 * time.Second)},
		"c": {fallbackTaskGoneSeen: t0}, // never seen with a task: not evicted as far as we know
	}
	r.applyFallback(polled)
	if a := r.bindings["a"]; a.evictedFromFallback || a.endedFromFallback || a.ended != t0.Add(5*time.Second) {
		t.Errorf("a = %+v, want the event times kept", a)
	}
	b := r.bindings["b"]
	if b == nil || !b.evictedFromFallback || !b.endedFromFallback || b.ended.Sub(b.evicted) != 9*time.Second {
		t.Errorf("b = %+v, want both times from the polls", b)
	}
	if _, ok := r.bindings["c"]; ok {
		t.Errorf("c was counted although no task was ever seen")
	}
	if r.fromFallback != 1 {
		t.Errorf("fromFallback = %d, want 1", r.fromFallback)
	}
}

func TestCPUFigures(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var samples []cpuSample
	for i := range 21 { // half a core for 10 s, then a full core for 10 s
		cpu := 0.5 * float64(min(i, 10))
		if i > 10 {
			cpu += float64(i - 10)
		}
		samples = append(samples, cpuSample{t0.Add(time.Duration(i) * time.Second), cpu})
	}
	active, peak := cpuFigures(samples, t0.Add(10*time.Second), t0.Add(20*time.Second))
	if math.Abs(active-100) > 0.01 || math.Abs(peak-100) > 0.01 {
		t.Errorf("cpuFigures = %.2f%%, peak %.2f%%; want 100%%, 100%%", active, peak)
	}
	active, _ = cpuFigures(samples, t0.Add(5500*time.Millisecond), t0.Add(7500*time.Millisecond))
	if math.Abs(active-50) > 0.01 {
		t.Errorf("cpuFigures between samples = %.2f%%, want 50%%", active)
	}
}

func TestSummarizeHubLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hub.log")
	log := `time=2026-11-23T02:51:00.000Z level=WARN msg="before the kill" controller=status
time=2026-11-23T02:51:12.012Z level=WARN msg="reconcile failed; retrying" controller=status key=bench/a err="conflict"
time=2026-11-23T02:51:13.012Z level=WARN msg="reconcile failed; retrying" controller=status key=bench/b err="conflict"
time=2026-11-23T02:51:14.012Z level=ERROR msg="store events" count=3 err=boom
time=2026-11-23T02:51:15.012Z level=INFO msg=evicted binding=bench/a
not a log line
`
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	s := summarizeHubLog(path, time.Date(2026, 11, 23, 2, 51, 10, 0, time.UTC))
	if s.readErr != nil || s.linesAfterKill != 4 || s.warns != 2 || s.errors != 1 {
		t.Fatalf("summary = %+v; want 4 lines, 2 warnings, 1 error", s)
	}
	if got := s.kinds[`WARN "reconcile failed; retrying" controller=status`]; got != 2 {
		t.Errorf("kinds = %v; want 2 status retries", s.kinds)
	}
	if len(s.firstMessages) != 2 {
		t.Errorf("firstMessages = %q; want one per kind", s.firstMessages)
	}
}
