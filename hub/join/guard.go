package join

import (
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed joins are what guessing a bootstrap token looks like, so they
// are bounded twice, before the token is even read: per token ID (its
// secret cannot be guessed one attempt after another) and for the whole
// hub (guessing spread over many IDs and addresses). Honest agents fail a
// join rarely: a typo, an expired or used token.
const (
	// failedBudget failed joins may come at once; then failedEvery refills.
	failedBudget = 60
	failedEvery  = time.Second
	// tokenFailures failed joins with one token ID within tokenWindow lock
	// that ID out for tokenLockout.
	tokenFailures = 5
	tokenWindow   = 10 * time.Minute
	tokenLockout  = 10 * time.Minute
	// maxTrackedTokens bounds the IDs remembered: an attacker picks IDs
	// at will. Past it, IDs neither locked nor failed lately are forgotten
	// first; the newest failure is always remembered.
	maxTrackedTokens = 10_000
)

// GuardCounts are the joins the guard refused or counted as failed.
type GuardCounts struct {
	// Failed joins: the token or the request was refused.
	Failed int64
	// TokenLocked joins were refused unread: their token ID failed too
	// often lately. BudgetSpent joins were refused unread: the hub's
	// budget of failed joins was spent.
	TokenLocked, BudgetSpent int64
}

// guard remembers failed joins; it is safe for concurrent use.
type guard struct {
	mu     sync.Mutex
	budget *rate.Limiter
	tokens map[string]*tokenFailure
	counts GuardCounts
}

// tokenFailure is one token ID's recent failures.
type tokenFailure struct {
	first       time.Time // of the failures counted
	count       int
	lockedUntil time.Time
}

func newGuard() *guard {
	return &guard{budget: rate.NewLimiter(rate.Every(failedEvery), failedBudget), tokens: map[string]*tokenFailure{}}
}

// refusal says why a join with token ID id is refused at now before it
// is read, or "" when it may go on.
func (g *guard) refusal(id string, now time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if f := g.tokens[id]; f != nil && now.Before(f.lockedUntil) {
		g.counts.TokenLocked++
		return fmt.Sprintf("bootstrap token %s failed %d joins within %v: it is refused until %s", id, tokenFailures, tokenWindow, f.lockedUntil.UTC().Format(time.RFC3339))
	}
	if g.budget.TokensAt(now) < 1 {
		g.counts.BudgetSpent++
		r := g.budget.ReserveN(now, 1)
		wait := r.DelayFrom(now)
		r.CancelAt(now)
		return fmt.Sprintf("too many failed joins on this hub lately: joins are refused for %v", wait.Round(time.Second)+time.Second)
	}
	return ""
}

// failed counts a failed join with token ID id (empty: malformed) at now.
func (g *guard) failed(id string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.counts.Failed++
	g.budget.AllowN(now, 1)
	if id == "" {
		return
	}
	f := g.tokens[id]
	if f == nil {
		if len(g.tokens) >= maxTrackedTokens {
			g.forgetLocked(now)
		}
		f = &tokenFailure{}
		g.tokens[id] = f
	}
	if now.Sub(f.first) > tokenWindow {
		f.first, f.count = now, 0
	}
	f.count++
	if f.count >= tokenFailures {
		f.lockedUntil = now.Add(tokenLockout)
		f.first, f.count = now, 0
	}
}

// forgetLocked drops the IDs neither locked nor failed within
// tokenWindow; if all are, half of them, so the map stays bounded.
func (g *guard) forgetLocked(now time.Time) {
	for id, f := range g.tokens {
		if !now.Before(f.lockedUntil) && now.Sub(f.first) > tokenWindow {
			delete(g.tokens, id)
		}
	}
	for id := range g.tokens {
		if len(g.tokens) < maxTrackedTokens/2 {
			return
		}
		delete(g.tokens, id)
	}
}

// Counts returns what the guard counted so far.
func (g *guard) Counts() GuardCounts {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts
}
