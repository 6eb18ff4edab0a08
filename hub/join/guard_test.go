package join

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var guardStart = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func TestGuardLocksOutATokenThatFailsOften(t *testing.T) {
	tests := []struct {
		name     string
		failures []time.Duration // after guardStart
		at       time.Duration
		locked   bool
	}{
		{"four failures", []time.Duration{0, 1, 2, 3}, 4, false},
		{"five failures", []time.Duration{0, 1, 2, 3, 4}, 5, true},
		{"five, spread past the window", []time.Duration{0, 1, 2, 3, tokenWindow + time.Second}, tokenWindow + 2*time.Second, false},
		{"locked until the lockout passes", []time.Duration{0, 1, 2, 3, 4}, 4 + tokenLockout - time.Second, true},
		{"free once it passed", []time.Duration{0, 1, 2, 3, 4}, 4 + tokenLockout, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGuard()
			for _, d := range tt.failures {
				g.failed("abcdef", guardStart.Add(d))
			}
			got := g.refusal("abcdef", guardStart.Add(tt.at))
			if (got != "") != tt.locked {
				t.Fatalf("refusal = %q, want locked %v", got, tt.locked)
			}
			if tt.locked && !strings.Contains(got, "bootstrap token abcdef failed") {
				t.Errorf("refusal = %q, want it to name the token", got)
			}
			if other := g.refusal("zzzzzz", guardStart.Add(tt.at)); other != "" {
				t.Errorf("another token was refused: %q", other)
			}
		})
	}
}

func TestGuardSpendsTheHubsBudgetOnlyOnFailures(t *testing.T) {
	g := newGuard()
	for i := range failedBudget {
		if r := g.refusal(fmt.Sprintf("id%04d", i), guardStart); r != "" {
			t.Fatalf("join %d refused before the budget was spent: %q", i, r)
		}
		g.failed(fmt.Sprintf("id%04d", i), guardStart)
	}
	if r := g.refusal("honest", guardStart); !strings.Contains(r, "too many failed joins") {
		t.Errorf("with the budget spent, refusal = %q", r)
	}
	if r := g.refusal("honest", guardStart.Add(failedEvery)); r != "" {
		t.Errorf("a refill later, refusal = %q", r)
	}
	want := GuardCounts{Failed: failedBudget, BudgetSpent: 1}
	if diff := cmp.Diff(want, g.Counts()); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
}

func TestGuardRemembersBoundedTokens(t *testing.T) {
	g := newGuard()
	for i := range 3 * maxTrackedTokens {
		g.failed(fmt.Sprintf("t%05d", i), guardStart.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(g.tokens); n > maxTrackedTokens {
		t.Errorf("%d token IDs remembered, want at most %d", n, maxTrackedTokens)
	}
	g.failed("last00", guardStart.Add(time.Hour))
	if g.tokens["last00"] == nil {
		t.Error("the newest failure was forgotten")
	}
}
