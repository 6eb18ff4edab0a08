package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	hubstats "github.com/flotilla-io/flotilla/hub/stats"
)

// stormTimeout is how long the tool waits for the fleet to come back
// after restarting the hub before it reports the ones still missing.
const stormTimeout = 5 * time.Minute

// storm is what a hub restart under the whole fleet cost.
type storm struct {
	how                 string        // "term" (graceful) or "kill"
	stopTook, startTook time.Duration // the old hub's exit; the new one's start to answering
	back, missing       int
	// backAfter are the agents' welcomes, measured from the stop.
	backAfter    []time.Duration
	redials      int64 // sessions dialled (each agent needs at least one)
	busy         int64 // dials the hub refused as busy
	falseUnknown int   // LeaseExpired events since the stop: every agent was alive
	// wentUnknown counts the new hub's Ready changes to Unknown: events
	// may be dropped, the counter is not.
	wentUnknown int64
	transitions int64 // Ready changes on the new hub
	worksSent   int64 // Works the new hub sent (a full resend would be every Work)
}

// measureStorm restarts the hub under the fleet (SIGTERM or SIGKILL, as
// how says), waits until every agent was welcomed by the new hub, then one
// lease longer, and reports how long it took and what went wrong.
func measureStorm(ctx context.Context, h *hubProc, f *fleet, how string) (storm, error) {
	s := storm{how: how}
	if err := waitStored(ctx, h); err != nil {
		return s, err
	}
	redialsBefore, busyBefore := f.redials.Load(), f.busy.Load()
	logf("restarting the hub (%s) under %d agents", how, len(f.agents))
	stopAt := time.Now()
	stop := h.proc.Stop
	if how == "kill" {
		stop = h.proc.Kill
	}
	if err := stop(); err != nil {
		return s, err
	}
	s.stopTook = time.Since(stopAt)
	startAt := time.Now()
	if err := h.start(); err != nil {
		return s, err
	}
	s.startTook = time.Since(startAt)
	logf("hub stopped in %v, started again in %v", s.stopTook.Round(time.Millisecond), s.startTook.Round(time.Millisecond))

	deadline := time.Now().Add(stormTimeout)
	lastLog := time.Now()
	for {
		s.back = 0
		for _, a := range f.agents {
			if time.Unix(0, a.welcomedAt.Load()).After(startAt) {
				s.back++
			}
		}
		if s.back == len(f.agents) || time.Now().After(deadline) {
			break
		}
		if time.Since(lastLog) >= 5*time.Second {
			logf("  %d of %d back after %v", s.back, len(f.agents), time.Since(stopAt).Round(time.Second))
			lastLog = time.Now()
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return s, err
		}
	}
	s.missing = len(f.agents) - s.back
	for _, a := range f.agents {
		if at := time.Unix(0, a.welcomedAt.Load()); at.After(startAt) {
			s.backAfter = append(s.backAfter, at.Sub(stopAt))
		}
	}
	sort.Slice(s.backAfter, func(i, j int) bool { return s.backAfter[i] < s.backAfter[j] })
	logf("%d of %d agents back; waiting one lease for renewals", s.back, len(f.agents))
	if err := sleepCtx(ctx, f.leaseDuration); err != nil {
		return s, err
	}
	s.redials, s.busy = f.redials.Load()-redialsBefore, f.busy.Load()-busyBefore

	var st hubstats.Stats
	if err := h.get("/debug/stats", &st); err != nil {
		return s, err
	}
	s.transitions, s.wentUnknown, s.worksSent = st.Transitions, st.UnknownTransitions, st.WorksSent
	expiries, err := leaseExpiries(h)
	if err != nil {
		return s, err
	}
	for _, ex := range expiries {
		if ex.at.After(stopAt) {
			s.falseUnknown++
		}
	}
	return s, nil
}

// waitStored waits until the hub has stored every cluster's health
// changes, as in a fleet that has run for a while: a hub stopped before
// that spends its stop storing them (the first verdicts of 10,000 clusters
// take minutes to store on two cores). Status reports are stored at the
// rate the API allows, so some are always waiting.
func waitStored(ctx context.Context, h *hubProc) error {
	deadline := time.Now().Add(stormTimeout)
	for {
		var st hubstats.Stats
		if err := h.get("/debug/stats", &st); err != nil {
			return err
		}
		if st.UnstoredHealth == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the hub still has %d clusters' health changes to store after %v", st.UnstoredHealth, stormTimeout)
		}
		logf("  waiting for the hub to store %d clusters' health changes before the restart", st.UnstoredHealth)
		if err := sleepCtx(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

func (s storm) print(w io.Writer, agents int) {
	fmt.Fprintf(w, "%-24sstopped in %v, answering again %v later\n", "hub restart ("+s.how+")", s.stopTook.Round(time.Millisecond), s.startTook.Round(time.Millisecond))
	fmt.Fprintf(w, "agents back             %d of %d (missing %d)", s.back, agents, s.missing)
	if len(s.backAfter) > 0 {
		fmt.Fprintf(w, ", after the stop: p50 %v  p99 %v  last %v", percentile(s.backAfter, 0.50).Round(time.Millisecond),
			percentile(s.backAfter, 0.99).Round(time.Millisecond), s.backAfter[len(s.backAfter)-1].Round(time.Millisecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "dials after the stop    %d (%.2f per agent; %d refused by the hub as busy)\n", s.redials, float64(s.redials)/float64(agents), s.busy)
	fmt.Fprintf(w, "false Unknown (restart) %d changes to Unknown on the new hub (%d LeaseExpired events kept; %d Ready changes in all, first verdicts included)\n", s.wentUnknown, s.falseUnknown, s.transitions)
	fmt.Fprintf(w, "Works sent (restart)    %d\n", s.worksSent)
}
