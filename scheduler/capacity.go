package scheduler

import (
	"math"
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/flotilla-io/flotilla/api/v1alpha1"
)

// AvailableReplicas is how many more replicas requesting req fit in c: the
// minimum, over "pods" (always requested, one per replica) and every
// resource req requests, of (allocatable − allocated) / request, from
// c.Status.ResourceSummary. A cluster without a summary, or whose summary
// does not list a requested resource (pods included) as allocatable, has
// room for none; a missing allocated amount counts as 0. Requests of 0 or
// less are ignored, and so is a "pods" entry in req (a replica is one pod).
// CPU is counted in millicores and every other resource in whole units
// (rounded up), exactly past int64 too; the result is never negative and
// saturates at math.MaxInt64.
func AvailableReplicas(c *v1alpha1.Cluster, req *v1alpha1.ReplicaRequirements) int64 {
	if c == nil || c.Status.ResourceSummary == nil {
		return 0
	}
	s := c.Status.ResourceSummary
	one := resource.MustParse("1")
	n := fitting(s, corev1.ResourcePods, &one)
	if req == nil {
		return n
	}
	// Map order does not matter: the minimum is the same.
	for name, q := range req.ResourceRequest {
		if n == 0 {
			break
		}
		if name == corev1.ResourcePods || q.Sign() <= 0 {
			continue
		}
		n = min(n, fitting(s, name, &q))
	}
	return n
}

// fitting is how many of request (positive, a copy it may convert) fit in
// what s has left of resource name.
func fitting(s *v1alpha1.ResourceSummary, name corev1.ResourceName, request *resource.Quantity) int64 {
	allocatable, ok := s.Allocatable[name]
	if !ok {
		return 0
	}
	// A copy that shares no decimal with the cluster's quantity: Sub
	// works in place.
	free := allocatable.DeepCopy()
	if allocated, ok := s.Allocated[name]; ok {
		free.Sub(allocated)
	}
	if free.Sign() <= 0 {
		return 0
	}
	f, fok := units(name, &free)
	r, rok := units(name, request)
	if fok && rok {
		return f / r
	}
	return bigQuotient(&free, request)
}

// units is a positive q in millicores for CPU and in units for every other
// resource, rounded up; false when that does not fit in an int64.
func units(name corev1.ResourceName, q *resource.Quantity) (int64, bool) {
	if name == corev1.ResourceCPU {
		if q.CmpInt64(math.MaxInt64/1000) >= 0 {
			return 0, false
		}
		return q.MilliValue(), true
	}
	if q.CmpInt64(math.MaxInt64-1) >= 0 {
		return 0, false
	}
	return q.Value(), true
}

// bigQuotient is ⌊x/y⌋ for positive quantities too large for int64 units,
// saturated at math.MaxInt64. At that size, rounding to units no longer
// matters, so it divides exactly.
func bigQuotient(x, y *resource.Quantity) int64 {
	dx, dy := x.AsDec(), y.AsDec() // unscaled·10^−scale
	num, den := new(big.Int).Set(dx.UnscaledBig()), new(big.Int).Set(dy.UnscaledBig())
	e := int64(dy.Scale()) - int64(dx.Scale())
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(e, -e)), nil)
	if e >= 0 {
		num.Mul(num, pow)
	} else {
		den.Mul(den, pow)
	}
	q := num.Quo(num, den)
	if !q.IsInt64() {
		return math.MaxInt64
	}
	return q.Int64()
}

// addSat is a+b for non-negative a and b, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// roomCache remembers AvailableReplicas per cluster for one Schedule call:
// ranking spread groups and dividing replicas by room both need it, and it
// is the costliest part of a schedule (a walk over the resource summary).
// With a Fleet, it reads the Fleet's table of every cluster's room, shared
// by every schedule with the same requirements. Without one, only the
// spread stores what it computed; division just reuses it, since filling a
// map costs more than computing the room once.
type roomCache struct {
	requirements *v1alpha1.ReplicaRequirements
	byName       map[string]int64
	fleet        *Fleet
	table        []int64 // by the Fleet's index; nil: no Fleet, or it remembers too much
}

func newRoomCache(req *v1alpha1.ReplicaRequirements, fleet *Fleet) *roomCache {
	r := &roomCache{requirements: req, fleet: fleet}
	if fleet != nil {
		r.table = fleet.roomsFor(req)
	}
	return r
}

// remember returns AvailableReplicas(c, requirements) and keeps it.
func (r *roomCache) remember(c *v1alpha1.Cluster, hint int) int64 {
	if n, ok := r.fromTable(c); ok {
		return n
	}
	if n, ok := r.byName[c.Name]; ok {
		return n
	}
	if r.byName == nil {
		r.byName = make(map[string]int64, hint)
	}
	n := AvailableReplicas(c, r.requirements)
	r.byName[c.Name] = n
	return n
}

// of returns AvailableReplicas(c, requirements), remembered or not.
func (r *roomCache) of(c *v1alpha1.Cluster) int64 {
	if n, ok := r.fromTable(c); ok {
		return n
	}
	if n, ok := r.byName[c.Name]; ok {
		return n
	}
	return AvailableReplicas(c, r.requirements)
}

// fromTable is c's room from the Fleet's table, if there is one.
func (r *roomCache) fromTable(c *v1alpha1.Cluster) (int64, bool) {
	if r.table == nil {
		return 0, false
	}
	i, ok := r.fleet.index[c]
	if !ok {
		return 0, false
	}
	return r.table[i], true
}
