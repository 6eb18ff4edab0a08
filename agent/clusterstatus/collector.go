// Package clusterstatus is what the agent reports about its member
// cluster: the API server's health (/readyz, falling back to /healthz), the
// Kubernetes version, the served APIs, and the node count and the sums of
// node allocatable resources and pod requests, kept up to date by two
// watches so that a report asks the API server for little.
//
// A [Capacity] runs the node and pod watches for the whole life of the
// agent; a [Collector] builds each report from them, from a [Probe] of the
// API server and from discovery, and keeps the last numbers it could read
// for the reports made while the API server is unreachable.
package clusterstatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/flotilla-io/flotilla/internal/ellipsis"
	"github.com/flotilla-io/flotilla/protocol"
)

const (
	// probeTimeout bounds each call to the member API server, so a hung
	// server delays a status report by seconds, not forever.
	probeTimeout = 5 * time.Second
	// apisRefresh is how often the served APIs are read again.
	apisRefresh = time.Minute
)

// Collector builds ClusterStatus reports from the member cluster. It
// remembers the last numbers it could read, so a report made while the API
// server is unreachable still carries them. It is not safe for concurrent
// use: one session's status loop uses it at a time.
type Collector struct {
	client   kubernetes.Interface
	capacity *Capacity
	probe    Probe
	clock    clock.PassiveClock
	timeout  time.Duration
	log      *slog.Logger

	last protocol.ClusterStatus // version, node and resource fields only
	// apis are the served APIs last read, and apisKey their identity, so a
	// session sends them only when they changed.
	apis       *protocol.ServedAPIs
	apisKey    string
	apisReadAt time.Time
	// healthy is the last reported API server health, once known is set.
	healthy, known bool
}

// NewCollector reads the member cluster through client; the node and
// pod sums come from caps, whose Run the agent starts.
func NewCollector(client kubernetes.Interface, caps *Capacity, probe Probe, clk clock.PassiveClock, log *slog.Logger) *Collector {
	return &Collector{client: client, capacity: caps, probe: probe, clock: clk, timeout: probeTimeout, log: log}
}

// Collect probes the API server and, if it is healthy, refreshes the
// version, node and resource numbers. It always returns a report. The
// only requests it makes are the probe, the version and, once a minute,
// discovery: the node and pod numbers come from watches.
func (c *Collector) Collect(ctx context.Context) *protocol.ClusterStatus {
	healthy, message := true, "ok"
	if err := c.call(ctx, c.probe); err != nil {
		healthy, message = false, ellipsis.Cut(err.Error(), maxHealthMessage)
	} else {
		c.refresh(ctx)
	}
	if ctx.Err() == nil { // failures from cancellation say nothing about the cluster
		c.noteHealth(healthy, message)
	}
	return &protocol.ClusterStatus{
		ObservedAt:        c.clock.Now(),
		KubernetesVersion: c.last.KubernetesVersion,
		APIServerHealthy:  healthy,
		HealthMessage:     message,
		NodesTotal:        c.last.NodesTotal,
		NodesReady:        c.last.NodesReady,
		Allocatable:       maps.Clone(c.last.Allocatable),
		Allocated:         maps.Clone(c.last.Allocated),
		ServedAPIs:        c.apis,
	}
}

// APIsKey identifies the served APIs the last Collect reported, so that a
// session sends them only when its hub does not have them yet.
func (c *Collector) APIsKey() string { return c.apisKey }

// noteHealth logs when the API server's health changes.
func (c *Collector) noteHealth(healthy bool, message string) {
	if c.known && healthy == c.healthy {
		return
	}
	c.known, c.healthy = true, healthy
	if healthy {
		c.log.Info("member API server is healthy")
	} else {
		c.log.Warn("member API server is unhealthy", "reason", message)
	}
}

// refresh reads the version and the served APIs and takes the node and
// pod sums from the watches; what fails keeps its last known value and is
// logged.
func (c *Collector) refresh(ctx context.Context) {
	for _, read := range []struct {
		what string
		f    func(context.Context) error
	}{
		{"version", c.readVersion},
		{"nodes and pods", c.readCapacity},
		{"served APIs", c.readAPIs},
	} {
		if err := c.call(ctx, read.f); err != nil && ctx.Err() == nil {
			c.log.Warn("cannot read the member cluster's "+read.what+", keeping the last known numbers", "err", err)
		}
	}
}

// call runs f with the per-probe timeout.
func (c *Collector) call(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return f(ctx)
}

// readAPIs reads the group versions and resources the cluster serves
// (subresources left out). A partial answer keeps the last full one: a
// kind missing by accident would steer workloads away.
func (c *Collector) readAPIs(ctx context.Context) error {
	// Discovery is the costliest read and APIs change rarely (a CRD
	// installed): once a minute is enough.
	if now := c.clock.Now(); !c.apisReadAt.IsZero() && now.Sub(c.apisReadAt) < apisRefresh {
		return nil
	}
	_, lists, err := c.client.Discovery().ServerGroupsAndResourcesWithContext(ctx)
	if err != nil {
		return fmt.Errorf("discover served APIs: %w", err)
	}
	apis := &protocol.ServedAPIs{}
	for _, list := range lists {
		gv := protocol.APIEnablement{GroupVersion: list.GroupVersion}
		for _, r := range list.APIResources {
			if !strings.Contains(r.Name, "/") {
				gv.Resources = append(gv.Resources, protocol.APIResource{Name: r.Name, Kind: r.Kind})
			}
		}
		slices.SortFunc(gv.Resources, func(a, b protocol.APIResource) int { return strings.Compare(a.Name, b.Name) })
		apis.Items = append(apis.Items, gv)
	}
	slices.SortFunc(apis.Items, func(a, b protocol.APIEnablement) int { return strings.Compare(a.GroupVersion, b.GroupVersion) })
	key, err := json.Marshal(apis)
	if err != nil {
		return err
	}
	if string(key) != c.apisKey {
		c.apis, c.apisKey = apis, string(key)
	}
	c.apisReadAt = c.clock.Now()
	return nil
}

func (c *Collector) readVersion(ctx context.Context) error {
	info, err := c.client.Discovery().ServerVersionWithContext(ctx)
	if err != nil {
		return fmt.Errorf("get server version: %w", err)
	}
	c.last.KubernetesVersion = info.GitVersion
	return nil
}

// readCapacity takes the node and pod sums from the watches. Before their
// first complete list it waits, at most the probe timeout, so that a
// session's first report carries them; a sum not complete yet keeps its
// last known value (none).
func (c *Collector) readCapacity(ctx context.Context) error {
	c.capacity.waitSynced(ctx, c.timeout)
	s := c.capacity.snapshot()
	if s.nodesSynced {
		c.last.NodesTotal, c.last.NodesReady = s.nodesTotal, s.nodesReady
		c.last.Allocatable = quantityStrings(s.allocatable)
	}
	if s.podsSynced {
		c.last.Allocated = quantityStrings(s.allocated)
	}
	switch {
	case !s.nodesSynced && !s.podsSynced:
		return errors.New("the node and pod watches have not listed them yet")
	case !s.nodesSynced:
		return errors.New("the node watch has not listed them yet")
	case !s.podsSynced:
		return errors.New("the pod watch has not listed them yet")
	}
	return nil
}
