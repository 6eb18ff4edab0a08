package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The store guard keeps etcd from filling up with what agents send. etcd
// refuses every write once its database reaches the backend quota (the
// NOSPACE alarm), health changes included, until it is compacted,
// defragmented and the alarm is disarmed. The guard watches the size and
// the alarms, tells the hub to refuse growth agents drive (Work status
// reports, events about agents) long before the quota, so that health
// changes (small) always have room, and does the recovery itself:
// defragmentation when much of the file is free and disarming NOSPACE once
// the data fits again. Compaction is the API server's (every five minutes)
// and, embedded, etcd's own (AutoCompactionRetention).

// Defaults of GuardConfig.
const (
	// DefaultQuota is etcd's own default backend quota.
	DefaultQuota = 2 << 30
	// DefaultAgentThreshold: agent-driven writes stop above half the quota.
	DefaultAgentThreshold   = 0.5
	defaultGuardInterval    = 10 * time.Second
	defaultDefragFreeRatio  = 0.5
	defaultMinDefragFree    = 64 << 20
	defaultMinDefragBetween = 10 * time.Minute
	// resumeFraction: once refusing, agent writes are allowed again only
	// below this fraction of the threshold. bbolt's in-use figure moves by
	// a few pages from one check to the next, so without a margin a store
	// at the threshold flips every check (and says so each time).
	resumeFraction = 0.8
)

// GuardConfig tunes the store guard.
type GuardConfig struct {
	// Quota is the backend quota in bytes (set on the embedded etcd; an
	// external etcd's --quota-backend-bytes should match it).
	Quota int64
	// AgentThreshold is the fraction of Quota, in use, above which
	// agent-driven growth is refused.
	AgentThreshold float64
	// Interval between checks.
	Interval time.Duration
	// MinDefragFree: the database is defragmented when at least this many
	// bytes, and half its size, are free, at most once per
	// MinDefragBetween.
	MinDefragFree    int64
	MinDefragBetween time.Duration
	// WatchOnly: decide whether agents may write, but never defragment
	// nor disarm (a hub replica standing by: the leader's guard does).
	WatchOnly bool
}

func (c GuardConfig) withDefaults() GuardConfig {
	if c.Quota <= 0 {
		c.Quota = DefaultQuota
	}
	if c.AgentThreshold <= 0 || c.AgentThreshold > 1 {
		c.AgentThreshold = DefaultAgentThreshold
	}
	if c.Interval <= 0 {
		c.Interval = defaultGuardInterval
	}
	if c.MinDefragFree <= 0 {
		c.MinDefragFree = defaultMinDefragFree
	}
	if c.MinDefragBetween <= 0 {
		c.MinDefragBetween = defaultMinDefragBetween
	}
	return c
}

// Guard watches one store. Its zero value is not usable: see NewGuard.
type Guard struct {
	client    *clientv3.Client
	endpoints []string
	cfg       GuardConfig
	logger    *slog.Logger

	size, inUse      atomic.Int64 // bytes, the largest over the endpoints
	noSpace          atomic.Bool  // a NOSPACE alarm is raised
	refusing         atomic.Bool  // agent-driven growth is refused
	refused          atomic.Int64 // agent-driven writes refused
	defrags, disarms atomic.Int64
	lastDefrag       time.Time // only the Run goroutine
	// onChange, if set, is called when refusing changes.
	onChange func(refusing bool, why string)
	// defrag defragments one endpoint.
	defrag func(ctx context.Context, endpoint string) error
}

// NewGuard returns a guard of s.
func (s *Store) NewGuard(cfg GuardConfig, onChange func(refusing bool, why string)) *Guard {
	g := &Guard{client: s.client, endpoints: s.endpoints, cfg: cfg.withDefaults(), logger: s.logger, onChange: onChange}
	g.defrag = func(ctx context.Context, ep string) error {
		_, err := s.client.Defragment(ctx, ep)
		return err
	}
	if s.embedded != nil {
		// The in-process client's Defragment lacks the server's health
		// notifier (it panics): defragment the backend directly.
		g.defrag = func(context.Context, string) error { return s.embedded.Server.Backend().Defrag() }
	}
	return g
}

// GuardStats are the guard's figures.
type GuardStats struct {
	Size, InUse, Quota int64
	NoSpace, Refusing  bool
	Refused            int64
	Defrags, Disarms   int64
}

// Stats returns the figures of the last check.
func (g *Guard) Stats() GuardStats {
	return GuardStats{Size: g.size.Load(), InUse: g.inUse.Load(), Quota: g.cfg.Quota, NoSpace: g.noSpace.Load(),
		Refusing: g.refusing.Load(), Refused: g.refused.Load(), Defrags: g.defrags.Load(), Disarms: g.disarms.Load()}
}

// AllowAgentWrite reports whether a write agents drive may go to the
// store now, and counts the ones that may not. A nil guard allows all.
func (g *Guard) AllowAgentWrite() bool {
	if g == nil || !g.refusing.Load() {
		return true
	}
	g.refused.Add(1)
	return false
}

// Run checks the store every Interval until ctx ends.
func (g *Guard) Run(ctx context.Context) {
	ticker := time.NewTicker(g.cfg.Interval)
	defer ticker.Stop()
	for {
		if err := g.check(ctx); err != nil && ctx.Err() == nil {
			g.logger.Warn("store guard: check failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// check reads the size and alarms, decides whether agents may write, and
// defragments or disarms when that helps.
func (g *Guard) check(runCtx context.Context) error {
	// A defragmentation gets its own, longer deadline (defragTimeout): a
	// large member can take longer than a check's interval, and a deadline
	// cut short would fail the members after it.
	ctx, cancel := context.WithTimeout(runCtx, g.cfg.Interval)
	defer cancel()
	var size, inUse int64
	var errs []error
	statuses := map[string]*clientv3.StatusResponse{}
	for _, ep := range g.endpoints {
		st, err := g.client.Status(ctx, ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("status of %s: %w", ep, err))
			continue
		}
		statuses[ep] = st
		size, inUse = max(size, st.DbSize), max(inUse, st.DbSizeInUse)
	}
	if len(statuses) == 0 {
		return errors.Join(errs...)
	}
	g.size.Store(size)
	g.inUse.Store(inUse)
	alarms, err := g.client.AlarmList(ctx)
	if err != nil {
		return fmt.Errorf("list alarms: %w", err)
	}
	var noSpace []*etcdserverpb.AlarmMember
	for _, a := range alarms.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			noSpace = append(noSpace, a)
		}
	}
	limit := int64(float64(g.cfg.Quota) * g.cfg.AgentThreshold)
	fits := inUse < limit
	switch {
	case g.cfg.WatchOnly:
	case len(noSpace) > 0 && fits:
		// Decide on the alarms still raised after the disarm, so the check
		// that clears NOSPACE also lets agents write again.
		noSpace = g.disarm(ctx, noSpace)
	case !fits:
		g.defragment(runCtx, statuses, true, len(noSpace) > 0)
	default:
		g.defragment(runCtx, statuses, false, false)
	}
	g.noSpace.Store(len(noSpace) > 0)
	why := fmt.Sprintf("store holds %d MiB, agent writes stop above %d MiB (%.0f %% of the %d MiB quota) and resume below %d MiB",
		inUse>>20, limit>>20, g.cfg.AgentThreshold*100, g.cfg.Quota>>20, resumeBelow(limit)>>20)
	if len(noSpace) > 0 {
		why = "etcd raised its NOSPACE alarm: " + why
	}
	g.setRefusing(refuseAgents(g.refusing.Load(), inUse, limit, len(noSpace) > 0), why)
	return errors.Join(errs...)
}

// refuseAgents decides whether agent-driven writes are refused: always
// while NOSPACE is raised; at or above limit bytes in use; and, once
// refusing, until the store holds less than resumeBelow(limit).
func refuseAgents(refusing bool, inUse, limit int64, noSpace bool) bool {
	switch {
	case noSpace || inUse >= limit:
		return true
	case refusing:
		return inUse >= resumeBelow(limit)
	default:
		return false
	}
}

func resumeBelow(limit int64) int64 { return int64(float64(limit) * resumeFraction) }

func (g *Guard) setRefusing(refusing bool, why string) {
	if g.refusing.Swap(refusing) == refusing {
		return
	}
	if refusing {
		g.logger.Warn("store guard: refusing agent-driven writes", "why", why)
	} else {
		g.logger.Info("store guard: agent-driven writes allowed again", "why", why)
	}
	if g.onChange != nil {
		g.onChange(refusing, why)
	}
}

// defragment defragments each member whose file is mostly free (or, when
// urgent, has any MinDefragFree free), at most once per MinDefragBetween:
// it blocks that member's writes while it runs. Under NOSPACE it
// defragments every member whatever its figures say: etcd counts pages
// freed by a compaction as free only at a later commit, which NOSPACE
// prevents, so the in-use figure can stay high after the data went, and
// only a defragmentation (which measures afresh) shows it fits again.
// The store takes no writes then anyway; the cost is a copy of each
// member's file every MinDefragBetween while the data does not fit (the
// member's reads wait for it), the first at the alarm itself.
func (g *Guard) defragment(ctx context.Context, statuses map[string]*clientv3.StatusResponse, urgent, noSpace bool) {
	if !g.lastDefrag.IsZero() && time.Since(g.lastDefrag) < g.cfg.MinDefragBetween {
		return
	}
	for ep, st := range statuses {
		if !needsDefrag(st.DbSize, st.DbSizeInUse, g.cfg.MinDefragFree, urgent, noSpace) {
			continue
		}
		g.lastDefrag = time.Now()
		start := time.Now()
		if err := g.defragWithin(ctx, ep); err != nil {
			g.logger.Warn("store guard: defragment failed", "endpoint", ep, "err", err)
			continue
		}
		g.defrags.Add(1)
		// Under NOSPACE the figures before may be stale: the size after
		// says what the defragmentation gave back.
		attrs := []any{"endpoint", ep, "underNoSpace", noSpace, "sizeBeforeMiB", st.DbSize >> 20, "took", time.Since(start)}
		if after, err := g.statusWithin(ctx, ep); err == nil {
			attrs = append(attrs, "sizeAfterMiB", after.DbSize>>20, "inUseAfterMiB", after.DbSizeInUse>>20)
		}
		g.logger.Info("store guard: defragmented", attrs...)
	}
}

// defragTimeout bounds one member's defragmentation (etcd copies the
// whole file: seconds per GiB).
const defragTimeout = 5 * time.Minute

func (g *Guard) statusWithin(ctx context.Context, ep string) (*clientv3.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, g.cfg.Interval)
	defer cancel()
	return g.client.Status(ctx, ep)
}

func (g *Guard) defragWithin(ctx context.Context, ep string) error {
	ctx, cancel := context.WithTimeout(ctx, defragTimeout)
	defer cancel()
	return g.defrag(ctx, ep)
}

// needsDefrag decides whether a member of size bytes, inUse of them in
// use, is defragmented (see defragment).
func needsDefrag(size, inUse, minFree int64, urgent, noSpace bool) bool {
	free := size - inUse
	switch {
	case noSpace:
		return true
	case free < minFree:
		return false
	default:
		return urgent || float64(free) >= float64(size)*defaultDefragFreeRatio
	}
}

// disarm clears NOSPACE alarms once the data fits again and returns the
// alarms it could not clear.
func (g *Guard) disarm(ctx context.Context, alarms []*etcdserverpb.AlarmMember) (raised []*etcdserverpb.AlarmMember) {
	for _, a := range alarms {
		if _, err := g.client.AlarmDisarm(ctx, (*clientv3.AlarmMember)(a)); err != nil {
			g.logger.Warn("store guard: disarm NOSPACE failed", "member", a.MemberID, "err", err)
			raised = append(raised, a)
			continue
		}
		g.disarms.Add(1)
		g.logger.Info("store guard: NOSPACE alarm disarmed: the data fits again", "member", a.MemberID)
	}
	return raised
}
