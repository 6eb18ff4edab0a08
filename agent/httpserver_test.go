package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-io/flotilla/protocol"
)

func TestReadiness(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		elect      bool
		agent      *Stats // nil: no agent runs
		lockSeenAt time.Duration
		want       string // "" ready, else part of the reason
	}{
		{name: "running, connected", agent: &Stats{Connected: true}},
		{name: "running, not connected", agent: &Stats{}, want: "not connected to the hub"},
		{name: "starting", want: "starting"},
		{name: "leader, connected", elect: true, agent: &Stats{Connected: true}},
		{name: "leader, not connected", elect: true, agent: &Stats{}, want: "leading, but not connected"},
		{name: "standby, read the Lease a moment ago", elect: true, lockSeenAt: -time.Second},
		{name: "standby, read the Lease a lease ago", elect: true, lockSeenAt: -16 * time.Second, want: "last read 16s ago"},
		{name: "standby, never read the Lease", elect: true, want: "last read never"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Hub: "hub:7443", LeaderElection: LeaderElection{Enabled: tc.elect}}.withDefaults()
			r := &runner{cfg: cfg}
			if tc.agent != nil {
				a := &Agent{}
				a.stats.s = *tc.agent
				r.agent.Store(a)
			}
			if tc.lockSeenAt != 0 {
				r.lockSeen.Store(now.Add(tc.lockSeenAt).UnixNano())
			}
			err := r.ready(now)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("ready = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestSessionEndReasons(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, endShutdown},
		{errRotated, endRotated},
		{errFencedWhileConnected, endFenced},
		{fmt.Errorf("%w for 40s (lease 40s)", errNoLeaseAck), endNoLease},
		{&goAwayError{reason: "hub shutting down"}, endGoAway},
		{fmt.Errorf("%w: control stream: bad frame", errProtocol), endProtocol},
		{fmt.Errorf("hub ended the session: %w", &protocol.Error{Code: protocol.CodeUnauthorized}), endRefused},
		{errors.New("read control stream: timeout: no recent network activity"), endLost},
	} {
		if got := endReason(tc.err); got != tc.want {
			t.Errorf("endReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
