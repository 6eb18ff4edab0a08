package protocol

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Bounds for Validate. They are far above what honest peers send and exist so
// a buggy or hostile peer cannot make the hub keep large strings per cluster.
const (
	maxShortString          = 1 << 10 // names, versions, codes
	maxLongString           = 4 << 10 // human-readable messages
	maxQuantityLength       = 64      // "96Gi", "1500m"; canonical forms are short
	maxResources            = 256     // entries in Allocatable or Allocated
	maxLeaseDurationSeconds = 3600
)

// wireMessage is implemented by every message in this package; Reader calls
// Validate after decoding.
type wireMessage interface {
	Message
	Validate() error
}

// Validate rejects a Hello the hub could not act on.
func (h *Hello) Validate() error {
	return invalid(TypeHello,
		positive("protocolVersion", h.ProtocolVersion),
		clusterName("clusterName", h.ClusterName),
		maxLen("agentVersion", h.AgentVersion, maxShortString),
		inRange("leaseDurationSeconds", h.LeaseDurationSeconds, 0, maxLeaseDurationSeconds),
	)
}

// Validate rejects a Welcome the agent could not act on. Unlike Hello, the
// lease and renew interval are the hub's decision and must be set; a renew
// interval as long as the lease would let the lease lapse between renewals.
func (w *Welcome) Validate() error {
	return invalid(TypeWelcome,
		positive("protocolVersion", w.ProtocolVersion),
		required("hubID", w.HubID),
		maxLen("hubID", w.HubID, maxShortString),
		nonZeroTime("hubTime", w.HubTime),
		inRange("leaseDurationSeconds", w.LeaseDurationSeconds, 1, maxLeaseDurationSeconds),
		inRange("renewIntervalMillis", w.RenewIntervalMillis, 1, int64(w.LeaseDurationSeconds)*1000-1),
	)
}

// Validate rejects a LeaseRenew without a timestamp.
func (l *LeaseRenew) Validate() error {
	return invalid(TypeLeaseRenew, nonZeroTime("agentTime", l.AgentTime))
}

// Validate rejects a LeaseAck without a timestamp: the agent uses it to
// estimate clock skew.
func (l *LeaseAck) Validate() error {
	return invalid(TypeLeaseAck, nonZeroTime("hubTime", l.HubTime))
}

// Validate rejects a ClusterStatus with impossible counts or quantities that
// Kubernetes would not parse.
func (s *ClusterStatus) Validate() error {
	return invalid(TypeClusterStatus,
		nonZeroTime("observedAt", s.ObservedAt),
		maxLen("kubernetesVersion", s.KubernetesVersion, maxShortString),
		maxLen("healthMessage", s.HealthMessage, maxLongString),
		inRange("nodesTotal", s.NodesTotal, 0, math.MaxInt32),
		inRange("nodesReady", s.NodesReady, 0, max(s.NodesTotal, 0)),
		resourceList("allocatable", s.Allocatable),
		resourceList("allocated", s.Allocated),
		servedAPIs(s.ServedAPIs),
	)
}

// Bounds of ServedAPIs: far above a cluster with hundreds of CRDs.
const (
	maxGroupVersions = 2048
	maxAPIResources  = 1024 // per group version
)

func servedAPIs(apis *ServedAPIs) error {
	if apis == nil {
		return nil
	}
	if len(apis.Items) > maxGroupVersions {
		return fmt.Errorf("servedAPIs has %d group versions, limit %d", len(apis.Items), maxGroupVersions)
	}
	for i, gv := range apis.Items {
		field := fmt.Sprintf("servedAPIs.items[%d]", i)
		if gv.GroupVersion == "" || len(gv.GroupVersion) > maxShortString {
			return fmt.Errorf("%s.groupVersion must be 1 to %d bytes", field, maxShortString)
		}
		if len(gv.Resources) > maxAPIResources {
			return fmt.Errorf("%s has %d resources, limit %d", field, len(gv.Resources), maxAPIResources)
		}
		for j, r := range gv.Resources {
			if len(r.Name) > maxShortString || len(r.Kind) > maxShortString || r.Kind == "" {
				return fmt.Errorf("%s.resources[%d]: name and kind must be 1 to %d bytes", field, j, maxShortString)
			}
		}
	}
	return nil
}

// Validate bounds the reason's length.
func (g *GoAway) Validate() error {
	return invalid(TypeGoAway, maxLen("reason", g.Reason, maxLongString))
}

// Validate requires a code. Codes this version does not know are accepted so
// newer peers can add them.
func (e *Error) Validate() error {
	return invalid(TypeError,
		required("code", e.Code),
		maxLen("code", e.Code, maxShortString),
		maxLen("message", e.Message, maxLongString),
	)
}

// invalid combines the results of field checks into one error that wraps
// ErrInvalidMessage, or nil if every check passed. Reporting every problem at
// once saves a round of fixing for whoever reads the log.
func invalid(t MessageType, checks ...error) error {
	var problems []string
	for _, err := range checks {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %v: %s", ErrInvalidMessage, t, strings.Join(problems, "; "))
}

type integer interface {
	~int | ~int32 | ~int64
}

func positive[T integer](field string, v T) error {
	if v <= 0 {
		return fmt.Errorf("%s %d must be positive", field, v)
	}
	return nil
}

func inRange[T integer](field string, v, lo, hi T) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s %d must be in [%d, %d]", field, v, lo, hi)
	}
	return nil
}

func required(field, s string) error {
	if s == "" {
		return fmt.Errorf("%s is required", field)
	}
	return nil
}

func maxLen(field, s string, limit int) error {
	if len(s) > limit {
		return fmt.Errorf("%s is %d bytes long, limit %d", field, len(s), limit)
	}
	return nil
}

func nonZeroTime(field string, t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("%s is required", field)
	}
	return nil
}

func clusterName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s is required", field)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, truncate(name), strings.Join(errs, ", "))
	}
	return nil
}

// resourceList checks a resource name → quantity map. Names follow the
// Kubernetes rule for resource names (qualified names such as
// "nvidia.com/gpu"); quantities must parse and must not be negative.
func resourceList(field string, list map[string]string) error {
	if len(list) > maxResources {
		return fmt.Errorf("%s has %d entries, limit %d", field, len(list), maxResources)
	}
	// Sorted so that the reported problem is the same every time.
	for _, name := range slices.Sorted(maps.Keys(list)) {
		value := list[name]
		if errs := validation.IsQualifiedName(name); len(errs) > 0 {
			return fmt.Errorf("%s: resource name %q: %s", field, truncate(name), strings.Join(errs, ", "))
		}
		if err := quantity(value); err != nil {
			return fmt.Errorf("%s[%s]: %w", field, name, err)
		}
	}
	return nil
}

func quantity(value string) error {
	if len(value) > maxQuantityLength {
		return fmt.Errorf("quantity is %d bytes long, limit %d", len(value), maxQuantityLength)
	}
	q, err := resource.ParseQuantity(value)
	if err != nil {
		return fmt.Errorf("quantity %q: %w", value, err)
	}
	if q.Sign() < 0 {
		return fmt.Errorf("quantity %q is negative", value)
	}
	return nil
}

// truncate keeps error messages about hostile input short.
func truncate(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
