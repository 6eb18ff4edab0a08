package dashboard

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestSignInFailuresLimitedPerSource: a source may fail signInBurst times,
// then once per signInEvery; beyond that it is refused before any
// TokenReview. Tokens already answered, and other sources, are not
// affected, and a source's addresses share its budget (an IPv6 /64).
func TestSignInFailuresLimitedPerSource(t *testing.T) {
	kube, tokenReviews, _ := reviewer(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	a := newAuthCache(kube, time.Hour, clk)
	ctx := t.Context()
	attacker := requestSource("[2001:db8:1:2::1]:40000")
	if _, err := a.authenticate(ctx, "good", attacker); err != nil { // answered before the attack: cached
		t.Fatal(err)
	}
	tokenReviews.Store(0)

	outcomes := map[string]int{}
	for i := range 50 {
		_, err := a.authenticate(ctx, fmt.Sprintf("guess-%d", i), attacker)
		var limited *ErrSignInLimited
		switch {
		case errors.As(err, &limited):
			outcomes["limited"]++
		case errors.Is(err, ErrUnauthenticated):
			outcomes["refused"]++
		default:
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if diff := cmp.Diff(map[string]int{"refused": signInBurst, "limited": 50 - signInBurst}, outcomes); diff != "" {
		t.Errorf("50 guessed tokens from one source (-want +got):\n%s", diff)
	}
	if n := tokenReviews.Load(); n != signInBurst {
		t.Errorf("%d TokenReviews for 50 guesses, want %d", n, signInBurst)
	}

	tests := []struct {
		name, token, addr string
		wantErr           string // "" for a sign-in
	}{
		{"a token answered before signs in", "good", "[2001:db8:1:2::1]:40000", ""},
		{"another address of the same /64 is limited", "guess-x", "[2001:db8:1:2::ffff]:1", "too many failed sign-ins from 2001:db8:1:2::/64: try again in 7s"},
		{"an unanswered good token from the source waits too", "good-new", "[2001:db8:1:2::1]:40000", "too many failed sign-ins"},
		{"another /64 is not", "guess-y", "[2001:db8:1:3::1]:1", "token not accepted"},
		{"an IPv4 address is its own source", "guess-z", "192.0.2.7:5", "token not accepted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.authenticate(ctx, tt.token, requestSource(tt.addr))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}

	clk.Step(signInEvery)
	if _, err := a.authenticate(ctx, "guess-after", attacker); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("after %v: err = %v, want one more attempt (refused by the API)", signInEvery, err)
	}
	if _, err := a.authenticate(ctx, "guess-after-2", attacker); !errors.As(err, new(*ErrSignInLimited)) {
		t.Errorf("then: err = %v, want limited again", err)
	}
}

// A sign-in that succeeds gives its attempt back: signing in never uses
// up the budget.
func TestSuccessfulSignInsCostNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := newSignInLimiter(clk)
	src := requestSource("198.51.100.1:1")
	for i := range 3 * signInBurst {
		if ok, _ := l.take(src); !ok {
			t.Fatalf("sign-in %d limited", i)
		}
		l.giveBack(src)
	}
}

// With maxSignInSources remembered and none idle, new sources share one
// budget: many addresses get no fresh budget each. Idle ones are
// forgotten once a sweep is due.
func TestSignInSourcesBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	l := newSignInLimiter(clk)
	source := func(i int) netip.Prefix {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18 + byte(i>>16), byte(i >> 8), byte(i)}), 32)
	}
	for i := range maxSignInSources {
		l.take(source(i))
	}
	allowed := 0
	for i := range 100 {
		if ok, _ := l.take(source(maxSignInSources + i)); ok {
			allowed++
		}
	}
	if allowed != signInBurst || len(l.sources) != maxSignInSources {
		t.Errorf("100 new sources past the bound: %d allowed, %d remembered; want %d (one shared budget), %d", allowed, len(l.sources), signInBurst, maxSignInSources)
	}
	clk.Step(signInBurst * signInEvery) // every budget whole again
	if ok, _ := l.take(source(2 * maxSignInSources)); !ok || len(l.sources) != 1 {
		t.Errorf("after the sources went idle: allowed %v, %d remembered; want a new source remembered alone", ok, len(l.sources))
	}
}
