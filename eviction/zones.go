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
// zero included: start from DefaultZoneConfig. A cluster rate of 0 (or
// less) halts evictions in the modes that use it, as a zero node eviction
// rate does in Kubernetes' node lifecycle controller.
type ZoneConfig struct {
	// ClusterRate is how many failed clusters per second per zone are
	// admitted to eviction in Normal and FullDisruption (default 0.1, one
	// every 10 s, as --node-eviction-rate in Kubernetes). Every binding on
	// an admitted cluster may be evicted at once.
	ClusterRate float64
	// SecondaryClusterRate is ClusterRate in PartialDisruption for zones
	// larger than LargeZoneThreshold (default 0.01).
	SecondaryClusterRate float64
	LargeZoneThreshold   int     // default 50: zones of <= this many clusters get 0 in PartialDisruption
	UnhealthyThreshold   float64 // default 0.55
	// BindingRate, when positive, is a ceiling on the bindings evicted per
	// second per zone from admitted clusters (Karmada's
	// --resource-eviction-rate). 0 (the default): no ceiling.
	BindingRate float64
}

// DefaultZoneConfig is the defaults of ZoneConfig.
func DefaultZoneConfig() ZoneConfig {
	return ZoneConfig{ClusterRate: DefaultClusterRate, SecondaryClusterRate: DefaultSecondaryClusterRate,
		LargeZoneThreshold: DefaultLargeZoneThreshold, UnhealthyThreshold: DefaultUnhealthyThreshold}
}

// Defaults of ZoneConfig: those of kube-controller-manager's
// --node-eviction-rate, --secondary-node-eviction-rate,
// --large-cluster-size-threshold and --unhealthy-zone-threshold.
const (
	DefaultClusterRate          = 0.1
	DefaultSecondaryClusterRate = 0.01
	DefaultLargeZoneThreshold   = 50
	DefaultUnhealthyThreshold   = 0.55
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

// Zones holds each zone's mode, its admission of failed clusters to
// eviction (one token bucket of clusters per zone, burst 1) and the
// optional ceiling on bindings, all driven by the times passed in, never
// the wall clock. It is not safe for concurrent use.
type Zones struct {
	cfg        ZoneConfig
	zones      map[string]*zone
	isolated   bool
	graceStart time.Time
	// admitted are the clusters admitted to eviction, waiting those that
	// asked and wait for their zone's bucket; both by cluster name.
	admitted map[string]Admission
	waiting  map[string]waiter
	// changes are the admissions given and taken back since TakeChanges.
	changes []AdmissionChange
}

// zone is one zone's state. mode is "" for a zone Admit was asked about
// before Observe saw it.
type zone struct {
	mode    Mode
	limit   float64       // clusters per second
	limiter *rate.Limiter // of clusters
	ceiling *rate.Limiter // of bindings; nil without ZoneConfig.BindingRate
	// restored is the latest admission Restore gave the zone.
	restored time.Time
}

// NewZones returns Zones with no zone observed yet. cfg is taken as it is:
// a zero ClusterRate or SecondaryClusterRate evicts nothing in the modes
// that use it.
func NewZones(cfg ZoneConfig) *Zones {
	return &Zones{cfg: cfg, zones: map[string]*zone{}, admitted: map[string]Admission{}, waiting: map[string]waiter{}}
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

// zoneFor returns a zone's state, made at ClusterRate for a zone not
// observed yet (a cluster the caller saw before Observe did).
func (z *Zones) zoneFor(name string) *zone {
	zn := z.zones[name]
	if zn == nil {
		zn = z.newZone(z.cfg.ClusterRate)
		z.zones[name] = zn
	}
	return zn
}

func (z *Zones) newZone(limit float64) *zone {
	zn := &zone{limit: limit, limiter: rate.NewLimiter(rate.Limit(max(limit, 0)), 1)}
	if z.cfg.BindingRate > 0 {
		zn.ceiling = rate.NewLimiter(rate.Limit(z.cfg.BindingRate), 1)
	}
	return zn
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
