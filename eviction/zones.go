package eviction

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// Mode is a zone's disruption state, which sets its eviction rate.
type Mode string

// Zone modes.
const (
	ModeNormal            Mode = "Normal"
	ModePartialDisruption Mode = "PartialDisruption"
	ModeFullDisruption    Mode = "FullDisruption"
	ModeIsolated          Mode = "Isolated" // every cluster of every zone is down: the hub assumes it is cut off
)

// ZoneConfig tunes partition protection. Every field is taken as it is,
// zero included: start from DefaultZoneConfig. A rate of 0 (or less) halts
// evictions in the modes that use it, as a zero eviction rate does in
// Kubernetes' node lifecycle controller.
type ZoneConfig struct {
	Rate               float64 // evictions (bindings) per second per zone in Normal and FullDisruption; default 0.5
	SecondaryRate      float64 // in PartialDisruption for zones larger than LargeZoneThreshold; default 0.01
	LargeZoneThreshold int     // default 50: zones of <= this many clusters get 0 in PartialDisruption
	UnhealthyThreshold float64 // default 0.55
}

// DefaultZoneConfig is the defaults of ZoneConfig.
func DefaultZoneConfig() ZoneConfig {
	return ZoneConfig{Rate: DefaultRate, SecondaryRate: DefaultSecondaryRate, LargeZoneThreshold: DefaultLargeZoneThreshold, UnhealthyThreshold: DefaultUnhealthyThreshold}
}

// Defaults of ZoneConfig.
const (
	DefaultRate               = 0.5
	DefaultSecondaryRate      = 0.01
	DefaultLargeZoneThreshold = 50
	DefaultUnhealthyThreshold = 0.55
)

// ClusterHealth is what Zones needs of a cluster. Zone "" is a zone too.
type ClusterHealth struct {
	Name, Zone string
	Ready      bool
}

// ModeChange is a zone's move from one mode to another. A zone seen for
// the first time has From ""; a zone that no longer has clusters has To ""
// and zero counts.
type ModeChange struct {
	Zone            string
	From, To        Mode
	NotReady, Total int
}

// Zones holds each zone's mode and eviction rate limiter (one token bucket
// per zone, burst 1, driven by the times passed in, never the wall clock).
// It is not safe for concurrent use.
type Zones struct {
	cfg        ZoneConfig
	zones      map[string]*zone
	isolated   bool
	graceStart time.Time
}

// zone is one zone's state. mode is "" for a zone Allow was asked about
// before Observe saw it.
type zone struct {
	mode    Mode
	limit   float64
	limiter *rate.Limiter
}

// NewZones returns Zones with no zone observed yet. cfg is taken as it is:
// a zero Rate or SecondaryRate evicts nothing in the modes that use it.
func NewZones(cfg ZoneConfig) *Zones {
	return &Zones{cfg: cfg, zones: map[string]*zone{}}
}

// GraceStart is when the hub last left Isolated (zero if never): taint
// allowances start no earlier.
func (z *Zones) GraceStart() time.Time { return z.graceStart }

// RestartGrace makes taint allowances start no earlier than now: a hub
// that has just started (and may have missed an isolation that ended
// while it was down) gives every cluster a full toleration again rather
// than evicting on deadlines it did not watch.
func (z *Zones) RestartGrace(now time.Time) {
	if now.After(z.graceStart) {
		z.graceStart = now
	}
}

// Modes returns each zone's mode (a copy).
func (z *Zones) Modes() map[string]Mode {
	out := make(map[string]Mode, len(z.zones))
	for name, zn := range z.zones {
		if zn.mode != "" {
			out[name] = zn.mode
		}
	}
	return out
}

// Allow takes one eviction token of the zone. ok=false when the zone's
// limit is 0 (retryAt zero: wait for a mode change) or the bucket is empty
// (retryAt = when a token will be there; nothing is consumed). An unknown
// zone is allowed at Rate (a cluster not observed yet). Isolated never
// allows, not even for an unknown zone: a hub that is cut off must not
// evict anything.
func (z *Zones) Allow(zone string, now time.Time) (ok bool, retryAt time.Time) {
	if z.isolated {
		return false, time.Time{}
	}
	zn := z.zones[zone]
	if zn == nil {
		zn = z.newZone(z.cfg.Rate)
		z.zones[zone] = zn
	}
	// Checked here, not left to the limiter: a rate.Limiter with limit 0
	// still hands out its burst.
	if zn.limit <= 0 {
		return false, time.Time{}
	}
	if zn.limiter.AllowN(now, 1) {
		return true, time.Time{}
	}
	return false, now.Add(untilToken(zn.limiter.TokensAt(now), zn.limit))
}

// untilToken is how long a bucket holding tokens takes to hold one at
// limit per second, rounded up so that a retry at that instant succeeds.
func untilToken(tokens, limit float64) time.Duration {
	ns := math.Ceil((1 - tokens) / limit * float64(time.Second))
	if ns >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(max(ns, 1))
}

func (z *Zones) newZone(limit float64) *zone {
	return &zone{limit: limit, limiter: rate.NewLimiter(rate.Limit(limit), 1)}
}
